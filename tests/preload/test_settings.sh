#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_settings.sh: settings as a process sees them through the preloaded library: the budget that
# each form gives, the one-time notice without a limit, the error and the safe state for a bad
# value, the ini file and the environment over it, per-device limits, and the denial line.
set -u
probe=$(dirname "$1")/probe_budget
. "$(dirname "$0")/../common.sh"

# run ENV... -- ARGS: runs the probe; stdout to $t/out, stderr to $t/err.
run() { preloaded "$TEST_PRELOAD" "$probe" -u GPUCAP_MEMORY_LIMIT GPUCAP_CONFIG=/dev/null "$@"; }

run -- 0 $((512 * MiB))
expect "no limit: notice" "gpucap: warning: loaded with no memory limit" err
expect "no limit: passes" "total=$((1024 * MiB)) .* alloc=0" out
[ "$(grep -c 'no memory limit' "$t/err")" = 1 ] || { echo "FAIL: the notice is not said exactly once"; fail=1; }

# The platform's maximum lowers what the process asked for: said once; without an ask, silent.
run GPUCAP_MEMORY_LIMIT=100GiB GPUCAP_MEMORY_LIMIT_MAX=50% -- 0 1
expect "maximum: applied" "total=$((512 * MiB)) " out
expect "maximum: said" "gpucap: warning: device 0: the budget asked for is above the platform.s maximum \\(memory_limit_max = 50%\\): the budget is 512.00 MiB" err
[ "$(grep -c "platform's maximum" "$t/err")" = 1 ] || { echo "FAIL: the clamp is not said exactly once"; fail=1; }
run GPUCAP_MEMORY_LIMIT_MAX=50% -- 0 1
grep -q "platform's maximum" "$t/err" && { echo "FAIL: the maximum alone is said as a clamp: $(cat "$t/err")"; fail=1; }
run GPUCAP_MEMORY_LIMIT=100MiB GPUCAP_MEMORY_LIMIT_MAX=50% -- 0 1
grep -q "platform's maximum" "$t/err" && { echo "FAIL: an ask below the maximum is said as a clamp: $(cat "$t/err")"; fail=1; }

run GPUCAP_MEMORY_LIMIT=lots -- 0 1
expect "bad value: error" "gpucap: error: GPUCAP_MEMORY_LIMIT: memory_limit = 'lots' is not valid; accepted: .*GiB" err
expect "bad value: denied" "alloc=2$" out

for form in "64MiB:$((64 * MiB))" "67108864:$((64 * MiB))" "0.0625GiB:$((64 * MiB))" "25%:$((256 * MiB))" \
            "100MB:100000000" "64Mi:$((64 * MiB))"; do
    run GPUCAP_MEMORY_LIMIT="${form%%:*}" -- 0 1
    expect "form ${form%%:*}" "^total=${form#*:} info_total=${form#*:} free=${form#*:} alloc=0" out
done

run GPUCAP_MEMORY_LIMIT=64MiB -- 0 $((65 * MiB))
expect "denial line" "gpucap: warning: cuMemAlloc_v2 denied on device 0: requested 65.00 MiB, in use 0 B, limit 64.00 MiB" err
expect "denial code" "alloc=2$" out

printf '[gpucap]\nmemory_limit = 128MiB\n[device.1]\nmemory_limit = 32MiB\n' > "$t/g.ini"
run GPUCAP_CONFIG="$t/g.ini" -- 0 1
expect "ini" "^total=$((128 * MiB)) " out
run GPUCAP_CONFIG="$t/g.ini" GPUCAP_MEMORY_LIMIT=16MiB -- 0 1
expect "env over ini" "^total=$((16 * MiB)) " out
run GPUCAP_CONFIG="$t/g.ini" FAKECUDA_DEVICES=2 -- 1 $((33 * MiB))
expect "ini per device" "^total=$((32 * MiB)) .*alloc=2$" out
run FAKECUDA_DEVICES=2 GPUCAP_MEMORY_LIMIT=1GiB GPUCAP_MEMORY_LIMIT_1=8MiB -- 1 $((9 * MiB))
expect "env per device" "^total=$((8 * MiB)) .*alloc=2$" out
run FAKECUDA_DEVICES=2 GPUCAP_MEMORY_LIMIT=1GiB GPUCAP_MEMORY_LIMIT_1=8MiB -- 0 $((9 * MiB))
expect "other device keeps the global limit" "^total=$((1024 * MiB)) .*alloc=0$" out

# By UUID: with CUDA_VISIBLE_DEVICES=1,0 ordinal 0 is card 1.
u1=GPU-fa4ec0da-0000-4000-8000-000000000001
run FAKECUDA_DEVICES=2 CUDA_VISIBLE_DEVICES=1,0 GPUCAP_MEMORY_LIMIT=1GiB "GPUCAP_MEMORY_LIMIT_$u1=8MiB" -- 0 $((9 * MiB))
expect "per-UUID limit follows the card" "^total=$((8 * MiB)) .*alloc=2$" out
run FAKECUDA_DEVICES=2 CUDA_VISIBLE_DEVICES=1,0 GPUCAP_MEMORY_LIMIT=1GiB "GPUCAP_MEMORY_LIMIT_$u1=8MiB" -- 1 $((9 * MiB))
expect "the other card keeps the global limit" "^total=$((1024 * MiB)) .*alloc=0$" out

printf '[gpucap]\nmemory_limit = 128 MiBs\n' > "$t/bad.ini"
run GPUCAP_CONFIG="$t/bad.ini" -- 0 1
expect "bad ini value: line" "bad.ini:2: memory_limit = '128 MiBs' is not valid" err
expect "bad ini value: denied" "alloc=2$" out

[ $fail = 0 ] && echo "settings: all process-level checks passed"
exit $fail
