#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_live_report.sh GPUCAP CLI_ALLOC: the report of a `gpucap run` whose budget changed live
# (issue 31): every change (when, from, to, by whom) and the peak of each budget period, in the text,
# the JSON and the SVG (a step in the budget line); `gpucap plot` of the JSON draws the same steps;
# `gpucap status` lists the changes.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
j() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
facts() { python3 "$(dirname "$0")/svg_facts.py" "$1"; }
unset GPUCAP_MEMORY_LIMIT GPUCAP_LEDGER

# 64 MiB held under 256 MiB; lowered to 96 MiB (64 more is denied: the period's peak stays 64); raised
# to 200 MiB (64 more is admitted: the last period's peak is 128).
run() { # run REPORT: the run in the background, the changes made from outside while it sleeps
    local json=
    case $1 in *.json) json=--json ;; esac
    "$gpucap" run --lib "${TEST_PRELOAD##*:}" -m 256MiB $json --report "$1" -- "$alloc" a64 s10 a64 s25 a64 s10 \
        > "$t/run.out" 2> "$t/run.err" &
    local pid=$!
    sleep 0.5
    # Each set-memory returns once the run's next allocation applied it (the run sleeps meanwhile).
    "$gpucap" set-memory --pid $pid --wait 10 96MiB > "$t/low" 2>&1 || bad "lower: $(cat "$t/low")"
    sleep 0.5
    "$gpucap" set-memory --pid $pid --wait 10 200MiB > "$t/high" 2>&1 || bad "raise: $(cat "$t/high")"
    [ "$1" = "$t/r.json" ] && "$gpucap" status --pid $pid > "$t/status" 2>&1
    wait $pid
    grep -q "results=010$" "$t/run.out" || bad "the run's allocations: $(cat "$t/run.out" "$t/run.err")"
}

run "$t/r.json"
python3 - "$t/r.json" <<'PY' || bad "JSON report: $(cat "$t/r.json")"
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]
M = 1 << 20
ch = d["budget_changes"]
assert [(c["from"], c["to"], c["by"]) for c in ch] == [(256 * M, 96 * M, "set-memory"), (96 * M, 200 * M, "set-memory")], ch
assert ch[0]["at"] < ch[1]["at"] and all(c["at"].endswith("Z") for c in ch), ch
assert [c["peak_before"] for c in ch] == [64 * M, 64 * M], ch
p = d["budget_periods"]
assert [(x["budget"], x["peak"]) for x in p] == [(256 * M, 64 * M), (96 * M, 64 * M), (200 * M, 128 * M)], p
assert p[0]["from"] is None and p[1]["from"] == ch[0]["at"] and p[2]["from"] == ch[1]["at"], p
assert d["budget"] == 200 * M and d["budget_changes_total"] == 2 and d["peak"] == 128 * M, d
PY
grep -qE "^  budget changed from 256.00 MiB to 96.00 MiB at .* \(set-memory\), peak before 64.00 MiB$" "$t/status" &&
    grep -qE "^  budget changed from 96.00 MiB to 200.00 MiB at .* \(set-memory\), peak before 64.00 MiB$" "$t/status" ||
    bad "status lists the changes: $(cat "$t/status")"

run "$t/r.txt"
grep -qE "^  budget changes +2$" "$t/r.txt" &&
    grep -qE "^    20[0-9-]+T[0-9:.]+Z  256.00 MiB -> 96.00 MiB \(set-memory\), peak before: 64.00 MiB$" "$t/r.txt" &&
    grep -qE "^    20[0-9-]+T[0-9:.]+Z  96.00 MiB -> 200.00 MiB \(set-memory\), peak before: 64.00 MiB$" "$t/r.txt" &&
    grep -qE "^  peak since +128.00 MiB \(budget 200.00 MiB\)$" "$t/r.txt" || bad "text report: $(cat "$t/r.txt")"

run "$t/r.svg"
facts "$t/r.svg" > "$t/facts" || bad "the SVG does not parse"
grep -qx "budget_lines=3" "$t/facts" && grep -qx "budget_levels=3" "$t/facts" && grep -qx "budget_steps=2" "$t/facts" ||
    bad "the budget line's steps in the SVG: $(cat "$t/facts")"
# The JSON report drawn by gpucap plot: the same steps.
"$gpucap" plot -o "$t/p.svg" "$t/r.json" || bad "gpucap plot"
facts "$t/p.svg" > "$t/pfacts" || bad "the plot does not parse"
grep -qx "budget_lines=3" "$t/pfacts" && grep -qx "budget_steps=2" "$t/pfacts" ||
    bad "the budget line's steps of gpucap plot: $(cat "$t/pfacts")"
exit $fail
