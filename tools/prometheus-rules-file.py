#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""prometheus-rules-file.py [--check]: the plain Prometheus rules file from the PrometheusRule.

examples/kubernetes/exporter/prometheus-rules.yaml is the Prometheus operator's object; a Prometheus
without the operator reads rule files (`rule_files:` of prometheus.yml), which hold only its
`spec.groups`. This writes them to examples/kubernetes/exporter/prometheus-rules.rules.yml, the same
groups with the same content (the alerts' runbook_url as shipped: replace the part before '#' there
with where your copy of docs/runbooks.md is read). With --check it writes nothing and exits 1 when
the file is not what it would write (tests/cli/test_exporter_manifests.py runs it so).
Needs python3-yaml.
"""
import os
import sys

import yaml

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "kubernetes", "exporter")
SOURCE = os.path.join(HERE, "prometheus-rules.yaml")
TARGET = os.path.join(HERE, "prometheus-rules.rules.yml")
HEAD = """# SPDX-License-Identifier: Apache-2.0
# Generated from prometheus-rules.yaml (the PrometheusRule's spec.groups) by
# tools/prometheus-rules-file.py: do not edit, edit that file and run the tool again. For Prometheus
# without the operator: add this file to `rule_files:` of prometheus.yml; `promtool check rules` and
# `promtool test rules` (tests/cli/exporter_rules_test.yaml) read it as it is. Replace the part of
# each runbook_url before '#' with where your copy of docs/runbooks.md is read.
"""


class Dumper(yaml.SafeDumper):
    """Strings of several lines as literal blocks, as a person would write them."""


def _string(dumper, value):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


Dumper.add_representer(str, _string)


def rules_text(source=SOURCE):
    with open(source) as f:
        rule = yaml.safe_load(f)
    return HEAD + yaml.dump({"groups": rule["spec"]["groups"]}, Dumper=Dumper, sort_keys=False, width=110,
                            allow_unicode=False)


def main():
    text = rules_text()
    if sys.argv[1:] == ["--check"]:
        with open(TARGET) as f:
            same = f.read() == text
        if not same:
            print(f"{TARGET} is not what {SOURCE} gives: run tools/prometheus-rules-file.py")
        return 0 if same else 1
    with open(TARGET, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
