#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench/run.sh [BUILD]: ns per cuMemAlloc_v2+cuMemFree_v2 pair on the fake driver (median of 7
# runs each): without gpucap, with a private budget (GPUCAP_LEDGER=off), and with the shared ledger
# (the default), on 1 and 8 threads, and as 4 processes sharing one ledger.
set -eu
. "$(dirname "$0")/compare.sh"
b=$build/bench/bench_alloc
run() { # run THREADS PAIRS [ENV...]
    local n=$1 pairs=$2; shift 2
    env "$@" "$b" "$n" "$pairs" | med
}
header "$(printf '%-12s' load)"
for n in 1 8; do
    compare "$(printf '%-12s' "$n thread(s)")" run $n $((n == 1 ? 400000 : 50000))
done
# 4 processes at once, one thread each: the mean of their medians.
four() { # four [ENV...]
    local pids=() out
    out=$(mktemp)
    for i in 1 2 3 4; do env "$@" "$b" 1 200000 | med >> "$out" & pids+=($!); done
    wait "${pids[@]}"
    awk '{s+=$1} END {printf "%.1f", s/NR}' "$out"
    rm -f "$out"
}
compare "$(printf '%-12s' "4 processes")" four
# 500 processes starting at once: time from the start signal to each one's first successful
# allocation (each has its own fake card), without gpucap, with private budgets, and on one fresh
# shared ledger.
crowd() { # crowd LABEL [ENV...]
    local label=$1; shift
    rm -f "$ledger"
    printf '%-8s ' "$label"
    env GPUCAP_MEMORY_LIMIT=1GiB GPUCAP_CONTEXT_RESERVE=0 FAKECUDA_MEM=2GiB "$@" "$build/bench/bench_crowd" 500 --bench
}
crowd none
crowd private GPUCAP_LEDGER=off LD_PRELOAD=$lib
crowd ledger GPUCAP_LEDGER=$ledger LD_PRELOAD=$lib
