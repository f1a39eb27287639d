#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_report.sh GPUCAP CLI_ALLOC: the report of `gpucap run` (text and JSON) for a run of
# several processes, its figures checked against the fake driver's own record (one record file for
# all processes); audit mode denies nothing and reports the peak the job needs; GPUCAP_REPORT
# written by the library itself at exit.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
export FAKECUDA_CTX_BYTES=0
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['devices'][0]; print(d[sys.argv[2]])" "$@"; }
fake() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" "$1" | tail -1; }

# Parent holds 16 MiB, a child adds 24 MiB then is denied 30 MiB (16+24+30 > 64), frees; parent
# frees, then reads the card-wide record. Peak 40 MiB, 2 allocations, 2 frees, 1 denial, largest 30.
FAKECUDA_RECORD=$t/record "$gpucap" run --memory 64MiB --report "$t/r.json" --json -- \
    "$alloc" a16 c:a24,a30,F F p > "$t/out" 2> "$t/err" || bad "run failed: $(cat "$t/err")"
[ "$(field "$t/r.json" peak)" = $((40 * MiB)) ] || bad "peak: $(cat "$t/r.json")"
[ "$(field "$t/r.json" peak)" = "$(fake "$t/out" peak)" ] || bad "peak vs the fake's: $(cat "$t/r.json" "$t/out")"
[ "$(field "$t/r.json" allocations)" = "$(fake "$t/out" allocs)" ] || bad "allocations vs the fake's"
[ "$(field "$t/r.json" frees)" = "$(fake "$t/out" frees)" ] || bad "frees vs the fake's"
[ "$(field "$t/r.json" allocations)" = 2 ] || bad "allocations: $(cat "$t/r.json")"
[ "$(field "$t/r.json" denials)" = 1 ] || bad "denials: $(cat "$t/r.json")"
[ "$(field "$t/r.json" largest)" = $((30 * MiB)) ] || bad "largest"
[ "$(field "$t/r.json" budget)" = $((64 * MiB)) ] || bad "budget"
[ "$(field "$t/r.json" in_use)" = 0 ] || bad "in use at the end"
field "$t/r.json" first_denial | grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$' || bad "first denial time"
grep -q "^results=01$" "$t/out" || bad "the child's results: $(cat "$t/out")"

# The same run as text on stdout ('-'; the command's own output goes to stderr then).
"$gpucap" run --memory 64MiB --report - -- "$alloc" a16 c:a24,a30,F F 2> /dev/null > "$t/err"
grep -qE "^  peak +40.00 MiB \($((40 * MiB)) bytes\)" "$t/err" || bad "text peak: $(cat "$t/err")"
grep -qE "^  denials +1$" "$t/err" || bad "text denials: $(cat "$t/err")"
grep -qE "^device GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}( \(GPU [0-9]+, [^)]*\))?: budget 64.00 MiB" "$t/err" ||
    bad "text device line: $(cat "$t/err")"
# No report written by the processes of the run themselves: exactly one.
[ "$(grep -c '^gpucap report' "$t/err")" = 1 ] || bad "one report for the run"

# Audit: 3 x 32 MiB under a 32 MiB budget all succeed; the peak is 96 MiB, 2 would-be denials.
FAKECUDA_RECORD=$t/record2 "$gpucap" run --audit --memory 32MiB --report "$t/a.json" --json -- \
    "$alloc" a32 a32 a32 p F > "$t/out" 2> "$t/err"
grep -q "results=000$" "$t/out" || bad "audit denied something: $(cat "$t/out" "$t/err")"
[ "$(field "$t/a.json" peak)" = $((96 * MiB)) ] || bad "audit peak: $(cat "$t/a.json")"
[ "$(field "$t/a.json" peak)" = "$(fake "$t/out" peak)" ] || bad "audit peak vs the fake's"
[ "$(field "$t/a.json" denials)" = 2 ] || bad "audit would-be denials: $(cat "$t/a.json")"
[ "$(grep -c 'audit: cuMemAlloc_v2 would be denied' "$t/err")" = 1 ] || bad "audit lines: $(cat "$t/err")"
grep -q "audit: 2 allocations on device 0 would have been denied" "$t/err" || bad "audit summary: $(cat "$t/err")"
grep -q '"mode":"audit"' "$t/a.json" || bad "audit in the JSON"
# GPUCAP_MODE=audit in the environment does the same.
GPUCAP_MODE=audit "$gpucap" run --memory 32MiB -- "$alloc" a32 a32 > "$t/out" 2>&1
grep -q "results=00$" "$t/out" || bad "GPUCAP_MODE=audit: $(cat "$t/out")"
# The settings read as the run's processes read them: GPUCAP_REPORT and GPUCAP_REPORT_FORMAT in the
# environment are --report and --json, and `mode = audit` in the ini file makes the report audit's.
printf '[gpucap]\nmode = audit\n' > "$t/audit.ini"
GPUCAP_CONFIG=$t/audit.ini GPUCAP_REPORT=$t/e.json GPUCAP_REPORT_FORMAT=json "$gpucap" run --memory 32MiB -- \
    "$alloc" a32 a32 > "$t/out" 2>&1
grep -q "results=00$" "$t/out" || bad "mode = audit in the ini file: $(cat "$t/out")"
grep -q '"mode":"audit"' "$t/e.json" || bad "GPUCAP_REPORT(_FORMAT) or the ini's mode: $(cat "$t/e.json" "$t/out")"
# Without a budget anywhere the run is measured at 100% of the card.
env -u GPUCAP_MEMORY_LIMIT "$gpucap" run --report "$t/n.json" --json -- "$alloc" a100 F > /dev/null 2>&1
[ "$(field "$t/n.json" peak)" = $((100 * MiB)) ] || bad "no budget: peak $(cat "$t/n.json")"

# The library alone: GPUCAP_REPORT at process exit.
GPUCAP_REPORT=$t/lib.json GPUCAP_REPORT_FORMAT=json LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 a100 F > /dev/null 2>&1
[ "$(field "$t/lib.json" peak)" = $((8 * MiB)) ] && [ "$(field "$t/lib.json" denials)" = 1 ] ||
    bad "GPUCAP_REPORT: $(cat "$t/lib.json" 2> /dev/null)"
GPUCAP_REPORT=- LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 F > /dev/null 2> "$t/err"
grep -q "^gpucap report" "$t/err" || bad "GPUCAP_REPORT=-: $(cat "$t/err")"
exit $fail
