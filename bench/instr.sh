#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench/instr.sh [BUILD] [DEVICES]: instructions per 4 KiB cuMemAlloc_v2+cuMemFree_v2 pair, counted
# exactly by callgrind (the difference between a run of 2N and one of N pairs, 1 thread), without
# gpucap, with a private budget (GPUCAP_LEDGER=off) and with the shared ledger; and what gpucap adds.
# DEVICES (default 1): the devices the fake driver shows (a process with several looks up the device
# of its context).
set -eu
build=${1:-build}
lib=$build/lib/libgpucap.so
prog=$build/bench/bench_alloc
export LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=64GiB GPUCAP_CONFIG=/dev/null FAKECUDA_DEVICES=${2:-1}
ledger=$(mktemp -u /tmp/gpucap-instr-XXXXXX.ledger)
tmp=$(mktemp -d)
trap 'rm -rf "$ledger" "$tmp"' EXIT
n=20000 runs=7 # bench_alloc repeats each run 7 times
count() { # count PAIRS [ENV...]: total instructions of the program
    local pairs=$1; shift
    env "$@" valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$prog" 1 "$pairs" >/dev/null 2>"$tmp/err"
    sed -n 's/^summary: *\([0-9]*\).*/\1/p;s/^totals: *\([0-9]*\).*/\1/p' "$tmp/out" | head -1
}
per() { # per [ENV...]: instructions per pair
    local x y
    x=$(count $n "$@"); y=$(count $((2 * n)) "$@")
    awk -v a="$x" -v b="$y" -v n=$((n * runs)) 'BEGIN{printf "%.1f", (b-a)/n}'
}
none=$(per -u LD_PRELOAD)
priv=$(per GPUCAP_MEMORY_LIMIT=32GiB GPUCAP_LEDGER=off LD_PRELOAD=$lib)
shared=$(per GPUCAP_MEMORY_LIMIT=32GiB GPUCAP_LEDGER=$ledger LD_PRELOAD=$lib)
printf '%-16s %10s %10s %10s %14s %14s\n' "instructions" none private ledger "private added" "ledger added"
printf '%-16s %10s %10s %10s %14.1f %14.1f\n' "per pair" "$none" "$priv" "$shared" \
    "$(awk -v a="$priv" -v b="$none" 'BEGIN{print a-b}')" "$(awk -v a="$shared" -v b="$none" 'BEGIN{print a-b}')"
