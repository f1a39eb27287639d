#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench/graph.sh [BUILD]: ns per cuGraphLaunch on the fake driver (median of 7 runs each), for a
# graph without allocation nodes and for one with an allocation node (2 MiB, freed inside):
# without gpucap, with a private budget (GPUCAP_LEDGER=off) and with the shared ledger (the
# default), on 1 thread and on 8 threads each launching its own graph.
set -eu
build=${1:-build}
lib=$build/lib/libgpucap.so
b=$build/bench/bench_graph
export LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=64GiB GPUCAP_CONFIG=/dev/null
ledger=$(mktemp -u /tmp/gpucap-bench-XXXXXX.ledger)
trap 'rm -f "$ledger"' EXIT
med() { sed -n 's/.*median_ns=\([0-9.]*\).*/\1/p'; }
run() { # run THREADS LAUNCHES KIND [ENV...]
    local n=$1 count=$2 kind=$3; shift 3
    env "$@" "$b" "$n" "$count" "$kind" | med
}
printf '%-8s %-10s %12s %12s %12s %14s %14s\n' graph load "none (ns)" "private (ns)" "ledger (ns)" "private added" \
    "ledger added"
for kind in plain alloc; do
    for n in 1 8; do
        if [ $kind = plain ]; then count=1000000; else count=200000; fi
        count=$((count / n))
        none=$(run $n $count $kind -u LD_PRELOAD)
        priv=$(run $n $count $kind GPUCAP_MEMORY_LIMIT=32GiB GPUCAP_LEDGER=off LD_PRELOAD=$lib)
        shared=$(run $n $count $kind GPUCAP_MEMORY_LIMIT=32GiB GPUCAP_LEDGER=$ledger LD_PRELOAD=$lib)
        printf '%-8s %-10s %12s %12s %12s %14.1f %14.1f\n' $kind "$n thread(s)" "$none" "$priv" "$shared" \
            "$(awk -v a="$priv" -v b="$none" 'BEGIN{print a-b}')" "$(awk -v a="$shared" -v b="$none" 'BEGIN{print a-b}')"
    done
done
