#!/bin/bash
# bench/run.sh [BUILD]: ns per cuMemAlloc_v2+cuMemFree_v2 pair on the fake driver, without and with
# libgpucap.so, on 1 and 8 threads (median of 7 runs each). Prints a table and the added cost.
set -eu
build=${1:-build}
lib=$build/lib/libgpucap.so
b=$build/bench/bench_alloc
export LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=64GiB
med() { sed -n 's/.*median_ns=\([0-9.]*\).*/\1/p'; }
printf '%-8s %14s %14s %12s\n' threads "without (ns)" "with (ns)" "added (ns)"
for n in 1 8; do
    pairs=$((n == 1 ? 400000 : 100000))
    without=$(env -u LD_PRELOAD "$b" "$n" "$pairs" | med)
    with=$(GPUCAP_MEMORY_LIMIT=32GiB LD_PRELOAD=$lib "$b" "$n" "$pairs" | med)
    printf '%-8s %14s %14s %12.1f\n' "$n" "$without" "$with" "$(awk -v a="$with" -v b="$without" 'BEGIN{print a-b}')"
done
