#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_devices.sh PROBE: budgets of several devices across processes that number them differently
# (FAKECUDA_DEVICES=2 and a shared FAKECUDA_RECORD set by ctest). PROBE is probe_budget.
#  - per-ordinal limits follow the process's own ordinals (CUDA_VISIBLE_DEVICES reorders them);
#  - a UUID in CUDA_VISIBLE_DEVICES selects that card, whose budget is the one by UUID in the ledger;
#  - a subset: the process sees one card, budgeted.
set -u
probe=$1
MiB=1048576
fail=0
run() { # VISIBLE DEVICE BYTES [VAR=VALUE...]: prints the probe's line
    vis=$1 dev=$2 bytes=$3; shift 3
    env "$@" CUDA_VISIBLE_DEVICES="$vis" LD_PRELOAD="$TEST_PRELOAD" "$probe" "$dev" "$bytes" 2>/dev/null
}
expect() { # NAME LINE PATTERN
    case "$2" in
    *$3*) echo "PASS $1: $2" ;;
    *) echo "FAIL $1: '$2' lacks '$3'"; fail=1 ;;
    esac
}
out=$(run 1,0 1 $((16 * MiB)) GPUCAP_MEMORY_LIMIT_1=32MiB)
expect "ordinal 1 of 1,0 has its own limit" "$out" "total=$((32 * MiB)) "
out=$(run 1,0 1 $((40 * MiB)) GPUCAP_MEMORY_LIMIT_1=32MiB)
expect "ordinal 1 of 1,0 is capped at 32 MiB" "$out" "alloc=2"
out=$(run 1,0 0 $((40 * MiB)) GPUCAP_MEMORY_LIMIT_1=32MiB)
expect "ordinal 0 of 1,0 has the global 64 MiB" "$out" "total=$((64 * MiB)) info_total=$((64 * MiB)) free=$((64 * MiB)) alloc=0"
out=$(run GPU-fa4ec0da-0000-4000-8000-000000000001 0 $((60 * MiB)))
expect "a UUID selects card 1 with the budget" "$out" "total=$((64 * MiB)) info_total=$((64 * MiB)) free=$((64 * MiB)) alloc=0"
out=$(run 1 0 $((65 * MiB)))
expect "a subset is capped" "$out" "alloc=2"
exit $fail
