#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""svg_facts.py FILE: what the CLI tests check in a usage picture (gpucap run --report FILE.svg,
gpucap plot), read from its elements by their class, one "name=value" a line:
  title          the title's text
  budget_lines   budget lines drawn (one per budget period); budget_levels: their distinct heights;
                 budget_steps: the steps between them (a live change of the budget)
  marks          denial marks; denied: the denials they stand for (each mark's tooltip starts with
                 its count)
  labels         the peak's and the budget's labels; peak_label: the peak's text ("|" between several)
  clashes        overlaps between a label and a mark or between two labels (boxes as drawn: 13 px
                 bold text about 7.6 px a character; a mark 12 px wide, 11 px tall)
  usage_paths    usage shapes drawn; usage_area: their area in square pixels
  xticks         the time axis' tick labels, comma-separated
Exit 1 (a traceback) when FILE is not an SVG that parses.
"""
import re
import sys
import xml.etree.ElementTree as ET

S = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()


def cls(tag, c):
    return [e for e in root.iter(S + tag) if e.get("class") == c]


def box(e):
    x, y, w = float(e.get("x")), float(e.get("y")), 7.6 * len("".join(e.itertext()))
    end = e.get("text-anchor") == "end"
    return (x - w if end else x, y - 13, x if end else x + w, y + 4)


def over(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


titles = cls("text", "title")
print("title=" + ("".join(titles[0].itertext()) if titles else ""))
print("budget_lines=%d" % len(cls("line", "budget")))
print("budget_levels=%d" % len({e.get("y1") for e in cls("line", "budget")}))
print("budget_steps=%d" % len(cls("line", "budgetstep")))
marks = []
denied = 0
for g in cls("g", "denial"):
    denied += int(re.match(r"(\d+)", g.find(S + "title").text).group(1))
    m = re.match(r"M([\d.]+) ([\d.]+)", g.find(S + "path").get("d"))
    x, y = float(m.group(1)), float(m.group(2))
    marks.append((x - 6, y - 11, x + 6, y))
print("marks=%d" % len(marks))
print("denied=%d" % denied)
peaks = cls("text", "peaklabel")
labels = [box(e) for e in peaks + cls("text", "budgetlabel")]
print("labels=%d" % len(labels))
print("peak_label=" + "|".join(e.text for e in peaks))
clash = sum(over(a, m) for a in labels for m in marks) + sum(over(a, b) for i, a in enumerate(labels) for b in labels[i + 1:])
print("clashes=%d" % clash)
usage = cls("path", "usage")
area = 0.0
for p in usage:
    pts = [(float(x), float(y)) for x, y in re.findall(r"[ML]([\d.]+) ([\d.]+)", p.get("d"))]
    area += abs(sum(a[0] * b[1] - b[0] * a[1] for a, b in zip(pts, pts[1:] + pts[:1]))) / 2
print("usage_paths=%d" % len(usage))
print("usage_area=%d" % area)
print("xticks=" + ",".join(e.text for e in cls("text", "xtick")))
