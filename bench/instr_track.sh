#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench/instr_track.sh [BUILD]: instructions per 4 KiB cuMemAlloc_v2+cuMemFree_v2 pair spent in the
# pointer table (libgpucap/core/track.c's own functions, not what they call), counted exactly by
# callgrind as bench/instr.sh counts the whole pair: the difference between a run of 2N and one of
# N pairs, 1 thread, private budget. One line per function, then the sum.
set -eu
build=${1:-build}
lib=$build/lib/libgpucap.so
prog=$build/bench/bench_alloc
export LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=64GiB GPUCAP_CONFIG=/dev/null GPUCAP_MEMORY_LIMIT=32GiB \
    GPUCAP_LEDGER=off LD_PRELOAD=$lib
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=20000 runs=7 # bench_alloc repeats each run 7 times
count() { # count PAIRS: "function instructions" for each function of track.c
    valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$prog" 1 "$1" >/dev/null 2>"$tmp/err"
    callgrind_annotate --inclusive=no --auto=no --threshold=100 "$tmp/out" | grep -v "=>" |
        sed -n 's/^ *\([0-9,]*\) .*libgpucap\/track\.c:\([A-Za-z_0-9.]*\) .*/\2 \1/p' | tr -d ,
}
count $n >"$tmp/a"
count $((2 * n)) >"$tmp/b"
awk -v pairs=$((n * runs)) 'NR == FNR { a[$1] = $2; next } { b[$1] = $2 }
    END {
        for (f in b) { d = (b[f] - a[f]) / pairs; if (d > 0.05) { printf "%-24s %8.1f\n", f, d; s += d } }
        printf "%-24s %8.1f\n", "track.c per pair", s
    }' "$tmp/a" "$tmp/b"
