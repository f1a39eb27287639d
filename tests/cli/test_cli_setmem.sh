#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_setmem.sh GPUCAP CLI_ALLOC GPUCAP_LOCKTEST PLATFORM_FILE: `gpucap set-memory` changes the
# budget of a running `gpucap run` (found by its pid): a raise is admitted at the process's next
# call, a lowering below its use denies what follows and takes nothing away; `gpucap status` says
# from what to what, when, by whom and that the use is above it; a ledger without a live process is
# changed at once and a process started later takes the new budget; under the platform's lock the
# command refuses; a SIZE that is not one is refused naming it.
set -u
gpucap=$1 alloc=$2 locktest=$3 plat=$4
. "$(dirname "$0")/../common.sh"
trap 'cleanup; rm -f "$plat"' EXIT
unset GPUCAP_MEMORY_LIMIT GPUCAP_LEDGER

# A run that holds 16 MiB, sleeps, asks for 100 MiB, sleeps, asks for 8 MiB, sleeps.
"$gpucap" run --lib "${TEST_PRELOAD##*:}" -m 64MiB -- "$alloc" a16 s20 a100 s20 a8 s20 > "$t/run.out" 2> "$t/run.err" &
pid=$!
sleep 0.5
"$gpucap" set-memory --pid $pid --wait 10 128MiB > "$t/raise" 2> "$t/raise.err"; rc=$?
[ $rc = 0 ] && grep -qE "^device GPU-.*: budget 128.00 MiB \(was 64.00 MiB\), in use 11[67].00 MiB$" "$t/raise" ||
    bad "raise: rc $rc $(cat "$t/raise" "$t/raise.err")"
sleep 0.3
child=$(cat /proc/$pid/task/$pid/children 2>/dev/null | awk '{print $1}')
ledger=$(tr '\0' '\n' < /proc/$child/environ 2>/dev/null | sed -n 's/^GPUCAP_LEDGER=//p')
"$gpucap" status --ledger "$ledger" > "$t/status1" 2>&1
# status reaches the run's private ledger by the run's pid, as set-memory does.
"$gpucap" status --pid $pid > "$t/status_pid" 2>&1 || bad "status --pid: $(cat "$t/status_pid")"
grep -q "^ledger $ledger (--pid $pid)" "$t/status_pid" || bad "status --pid shows another ledger: $(head -2 "$t/status_pid")"
"$gpucap" status --pid $pid --ledger "$ledger" > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || bad "status --pid with --ledger: rc $rc, want 2"
"$gpucap" status --pid 999999999 > /dev/null 2> "$t/nopid"; rc=$?
[ $rc = 1 ] && grep -q "names no GPUCAP_LEDGER" "$t/nopid" || bad "status --pid of no process: rc $rc $(cat "$t/nopid")"
grep -qE "^  budget changed from 64.00 MiB to 128.00 MiB at 20[0-9-]+T[0-9:]+Z \(set-memory\), peak before 16.00 MiB$" "$t/status1" ||
    bad "status after the raise: $(cat "$t/status1")"
"$gpucap" set-memory --pid $pid --wait 10 32MiB > "$t/lower" 2> "$t/lower.err"; rc=$?
[ $rc = 0 ] && grep -qE "budget 32.00 MiB \(was 128.00 MiB\), in use 116.00 MiB: above the lowered budget" "$t/lower" ||
    bad "lower: rc $rc $(cat "$t/lower" "$t/lower.err")"
"$gpucap" status --ledger "$ledger" --json > "$t/status2.json" 2>&1
"$gpucap" status --ledger "$ledger" > "$t/status2" 2>&1
grep -q "^  above the budget by 84.00 MiB: nothing more is admitted until the use is below it$" "$t/status2" ||
    bad "status above: $(cat "$t/status2")"
python3 - "$t/status2.json" <<'PY' || bad "status json: $(cat "$t/status2.json")"
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]
assert d["budget"] == 32 << 20 and d["above_budget"] is True, d
c = d["budget_changed"]
assert c["from"] == 128 << 20 and c["to"] == 32 << 20 and c["by"] == "set-memory" and c["changes"] == 2, c
PY
wait $pid
grep -q "results=001$" "$t/run.out" || bad "the run's allocations: $(cat "$t/run.out" "$t/run.err")"
grep -q "gpucap: warning: device 0: 116.00 MiB in use is above the lowered budget 32.00 MiB" "$t/run.err" ||
    bad "the process says it is above: $(cat "$t/run.err")"

# A ledger whose processes are gone: changed here; a later process takes it.
GPUCAP_LEDGER=$t/l GPUCAP_MEMORY_LIMIT=64MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 > /dev/null 2>&1
"$gpucap" set-memory --ledger "$t/l" 256MiB > "$t/idle" 2>&1; rc=$?
[ $rc = 0 ] && grep -qE "budget 256.00 MiB \(was 64.00 MiB\), in use 0 B$" "$t/idle" || bad "idle ledger: rc $rc $(cat "$t/idle")"
grep -q "^no process uses ledger $t/l now: the next process that joins it takes this budget" "$t/idle" ||
    bad "an idle ledger is not said to be one: $(cat "$t/idle")"
GPUCAP_LEDGER=$t/l GPUCAP_MEMORY_LIMIT=64MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" a200 > "$t/later" 2>&1
grep -q "results=0$" "$t/later" || bad "a later process did not take the budget set: $(cat "$t/later")"
# Once the last process on the ledger has left, a new run's own settings apply again.
GPUCAP_LEDGER=$t/l GPUCAP_MEMORY_LIMIT=64MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" a200 > "$t/next" 2>&1
grep -q "results=1$" "$t/next" || bad "a later run still took the budget set: $(cat "$t/next")"

# Refusals.
"$gpucap" set-memory --ledger "$t/l" lots > /dev/null 2> "$t/err"; rc=$?
# A bad SIZE is a usage error: exit 2, one line pointing at --help.
[ $rc = 2 ] && grep -q "^gpucap set-memory: 'lots' is not a budget.*(see 'gpucap set-memory --help')$" "$t/err" &&
    [ "$(wc -l < "$t/err")" = 1 ] || bad "bad size: rc $rc $(cat "$t/err")"
mkdir -p "$(dirname "$plat")"
printf '[gpucap]\nlock = true\nmemory_limit = 64MiB\nledger = %s\n' "$t/l" > "$plat"
"$locktest" set-memory --ledger "$t/l" 1GiB > /dev/null 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "the settings are locked by $plat: the budget is the platform's" "$t/err" ||
    bad "locked: rc $rc $(cat "$t/err")"
exit $fail
