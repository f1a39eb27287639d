#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_faults.sh GPUCAP CLI_ALLOC: fault injection: fail_after fails exactly the attempts after
# the N-th; fail_rate with a seed fails the same attempts in every run and others with another
# seed; injected failures never reach the driver and count as denials; backtraces of denials name
# the calling function.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
ops=$(for i in $(seq 60); do printf 'a1 F '; done)

"$gpucap" run --fail-after 3 --report "$t/r.json" --json -- "$alloc" a1 a1 a1 a1 a1 F > "$t/out" 2> "$t/err"
grep -q "results=00011$" "$t/out" || bad "fail-after 3: $(cat "$t/out")"
[ "$(grep -c 'fault injected: cuMemAlloc_v2 .*allocation #[45] ' "$t/err")" = 2 ] || bad "fault lines: $(cat "$t/err")"
python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['devices'][0]; sys.exit(not (d['denials']==2 and d['allocations']==3))" \
    "$t/r.json" || bad "injected failures as denials: $(cat "$t/r.json")"

# The library alone, without a budget: the variables work too, and the driver never sees them.
env -u GPUCAP_MEMORY_LIMIT GPUCAP_FAIL_AFTER=1 LD_PRELOAD=$TEST_PRELOAD "$alloc" a1 a1 a1 F > "$t/out" 2>/dev/null
grep -q "results=011$" "$t/out" || bad "GPUCAP_FAIL_AFTER without a budget: $(cat "$t/out")"

run_rate() { "$gpucap" run --fail-rate 0.3 --seed "$1" -- "$alloc" $ops 2> /dev/null | sed -n 's/^results=//p'; }
a=$(run_rate 7) b=$(run_rate 7) c=$(run_rate 8)
[ ${#a} = 60 ] || bad "rate: 60 attempts, got '${a}'"
[ "$a" = "$b" ] || bad "same seed, different failures: $a / $b"
[ "$a" != "$c" ] || bad "another seed, same failures: $a"
n=$(printf '%s' "$a" | tr -d 0 | wc -c)
[ "$n" -ge 6 ] && [ "$n" -le 32 ] || bad "rate 0.3 of 60 failed $n"
"$gpucap" run --fail-rate 0 -- "$alloc" a1 a1 F | grep -q "results=00$" || bad "rate 0 fails nothing"
"$gpucap" run --fail-rate 1 -- "$alloc" a1 a1 | grep -q "results=11$" || bad "rate 1 fails everything"
"$gpucap" run --fail-rate 2 -- true 2> /dev/null; [ $? = 125 ] || bad "--fail-rate 2 accepted"
GPUCAP_FAIL_RATE=lots LD_PRELOAD=$TEST_PRELOAD "$alloc" a1 F > "$t/out" 2> "$t/err"
grep -q "GPUCAP_FAIL_RATE: fail_rate = 'lots' is not valid" "$t/err" || bad "bad rate: $(cat "$t/err")"

# Backtraces name the calling function, through --backtrace and through the variable.
"$gpucap" run --memory 8MiB --backtrace -- "$alloc" n16 > /dev/null 2> "$t/err"
grep -qE "^gpucap:   #[0-9]+ cli_named_allocator\+0x[0-9a-f]+$" "$t/err" || bad "backtrace: $(cat "$t/err")"
grep -qE "^gpucap:   #[0-9]+ main\+0x" "$t/err" || bad "backtrace reaches main: $(cat "$t/err")"
GPUCAP_BACKTRACE=1 GPUCAP_MEMORY_LIMIT=8MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" n16 > /dev/null 2> "$t/err"
grep -qE "cli_named_allocator\+0x" "$t/err" || bad "GPUCAP_BACKTRACE=1: $(cat "$t/err")"
# Off by default, and libunwind is not loaded into a process that is never denied.
GPUCAP_MEMORY_LIMIT=8MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" n16 > /dev/null 2> "$t/err"
grep -q "call stack" "$t/err" && bad "backtrace without asking"
GPUCAP_BACKTRACE=1 GPUCAP_MEMORY_LIMIT=8MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" a1 m F 2> /dev/null | grep -q "unwind=0" ||
    bad "libunwind loaded before any denial"
GPUCAP_BACKTRACE=1 GPUCAP_MEMORY_LIMIT=8MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" a16 m 2> /dev/null | grep -q "unwind=1" ||
    bad "libunwind not loaded at the denial"
exit $fail
