#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_plot.sh GPUCAP CLI_ALLOC: the usage timeline. `gpucap run --report FILE.svg` draws a run
# of several processes (the SVG parses; it shows the budget line, one mark per denial and the peak
# labelled with the report's figure); the JSON report carries the timeline (its highest point is
# the peak, its denials add up to the report's); `gpucap plot` draws that JSON (audit wording);
# the library's own GPUCAP_REPORT has the timeline too; rsvg-convert renders the pictures.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
export FAKECUDA_CTX_BYTES=0 GPUCAP_CONTEXT_RESERVE=0

svg_facts=$(dirname "$0")/svg_facts.py

# A parent and a child: 16, then the child 24 (40 in all) and a denied 30, then 20 (36) and a
# denied 40 in the parent.
"$gpucap" run --memory 64MiB --report "$t/u.svg" -- "$alloc" a16 s1 c:a24,s1,a30,F s1 a20 a40 F > /dev/null \
    2> "$t/err" || bad "run failed: $(cat "$t/err")"
facts python3 "$svg_facts" "$t/u.svg" || bad "the SVG does not parse"
[ "$(fact budget_lines)" = 1 ] || bad "budget line: $(fact budget_lines) $(head -c 300 "$t/u.svg")"
[ "$(fact denied)" = 2 ] || bad "denials marked: $(fact denied) in $(fact marks) marks"
[ "$(fact usage_paths)" = 1 ] || bad "usage path: $(fact usage_paths)"
[ "$(fact peak_label)" = "peak 40 MiB" ] || bad "peak label: '$(fact peak_label)'"
grep -q 'peak 40 MiB of a 64 MiB budget' "$t/u.svg" || bad "title: $(grep title "$t/u.svg" | head -2)"

# The same run, JSON: the timeline's highest point is the peak, its denials those of the report.
"$gpucap" run --audit --memory 32MiB --report "$t/a.json" --json -- "$alloc" a16 s1 c:a24,s1,a30,F s1 a20 a40 F \
    > /dev/null 2>&1 || bad "audit run failed"
python3 - "$t/a.json" <<'PY' || bad "JSON timeline: $(cat "$t/a.json")"
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]
pts = d["timeline"]["points"]
assert max(p[1] for p in pts) == d["peak"] == 76 * 2**20, (d["peak"], pts)
assert sum(p[3] for p in pts) == d["denials"] == 4, (d["denials"], pts)
assert all(a[0] <= b[0] for a, b in zip(pts, pts[1:])), pts
assert pts[-1][2] == 0
PY
"$gpucap" plot "$t/a.json" -o "$t/a.svg" || bad "gpucap plot failed"
facts python3 "$svg_facts" "$t/a.svg" || bad "the plotted SVG does not parse"
[ "$(fact budget_lines)" = 1 ] && [ "$(fact denied)" = 4 ] ||
    bad "plotted budget/denials: $(fact budget_lines) $(fact denied)"
[ "$(fact peak_label)" = "peak 76 MiB: the budget this job needs" ] || bad "audit peak label: '$(fact peak_label)'"
"$gpucap" plot "$t/nothere.json" -o "$t/x.svg" 2> "$t/err" && bad "plot of a missing file succeeded"
echo '{"mode":"enforce"}' > "$t/bad.json"
"$gpucap" plot "$t/bad.json" 2> "$t/err" > /dev/null && bad "plot of a report without devices succeeded"
grep -q 'not a gpucap JSON report' "$t/err" || bad "plot error: $(cat "$t/err")"

# The library's own report at exit (no gpucap run).
GPUCAP_MEMORY_LIMIT=64MiB GPUCAP_LEDGER=off GPUCAP_CONFIG=/dev/null GPUCAP_REPORT="$t/lib.json" \
    GPUCAP_REPORT_FORMAT=json LD_PRELOAD="$TEST_PRELOAD" "$alloc" a16 s1 a24 F > /dev/null 2>&1
python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['devices'][0]; assert max(p[1] for p in d['timeline']['points']) == 40*2**20" \
    "$t/lib.json" || bad "library report timeline: $(cat "$t/lib.json")"

# Rendered, as a person would look at it.
if command -v rsvg-convert > /dev/null; then
    rsvg-convert "$t/u.svg" -o "$t/u.png" && rsvg-convert "$t/a.svg" -o "$t/a.png" || bad "rsvg-convert failed"
    [ -s "$t/u.png" ] && [ -s "$t/a.png" ] || bad "empty rendering"
fi
exit $fail
