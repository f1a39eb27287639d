#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench/graph.sh [BUILD]: ns per cuGraphLaunch on the fake driver (median of 7 runs each), for a
# graph without allocation nodes and for one with an allocation node (2 MiB, freed inside):
# without gpucap, with a private budget (GPUCAP_LEDGER=off) and with the shared ledger (the
# default), on 1 thread and on 8 threads each launching its own graph.
set -eu
. "$(dirname "$0")/compare.sh"
b=$build/bench/bench_graph
run() { # run THREADS LAUNCHES KIND [ENV...]
    local n=$1 count=$2 kind=$3; shift 3
    env "$@" "$b" "$n" "$count" "$kind" | med
}
header "$(printf '%-8s %-10s' graph load)"
for kind in plain alloc; do
    for n in 1 8; do
        if [ $kind = plain ]; then count=1000000; else count=200000; fi
        compare "$(printf '%-8s %-10s' $kind "$n thread(s)")" run $n $((count / n)) $kind
    done
done
