#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench/live.sh [BUILD] [LIB]: the bound of a live lowering, measured on the fake driver's record of
# the card (tests/preload/test_live_exact.c, case lower): 4 processes x 2 threads churning 8-16 MiB
# allocations, some 350 MiB held of 512 MiB, the settings file rewritten to 128 MiB; printed per way
# of rewriting (gen: the text, then the generation line, as gpucap-agent does; value: the limit's
# value rewritten in place; other: a per-device line, which moves no watched word) and budget
# (shared ledger, private): the MiB admitted by calls made after the rewrite returned with the card
# above the new budget (summed over the processes), the allocations charged on the card while it
# stayed above it, and how long the card stayed above it. LIB (default BUILD/lib/libgpucap.so): a
# library to measure (another build's, for a before/after). Then the time `gpucap set-memory` takes
# to exit once in force against a process allocating every 100 ms.
set -eu
build=${1:-build}
lib=${2:-$build/lib/libgpucap.so}
prog=$build/tests/test_live_exact
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=1GiB GPUCAP_CONTEXT_RESERVE=0 GPUCAP_CONFIG=/dev/null \
    FAKECUDA_EAGER_REAP=1 TEST_FILE=1 TEST_VERBOSE=1 TEST_CLI=$build/tools/gpucap/gpucap
printf '%-8s %-8s %18s %18s %14s\n' budget rewrite "admitted past MiB" "charged above" "above for ms"
for budget in shared private; do
    for gen in 1 0 2; do
        name=$([ $gen = 1 ] && echo gen || { [ $gen = 0 ] && echo value || echo other; })
        rm -f "$tmp"/l*
        if [ $budget = shared ]; then
            env GPUCAP_LEDGER=$tmp/l FAKECUDA_RECORD=$tmp/l.rec TEST_GEN=$gen LD_PRELOAD=$lib "$prog" lower > "$tmp/out" 2>&1 || true
        else
            env GPUCAP_LEDGER=off TEST_SETTINGS=$tmp/l FAKECUDA_RECORD=$tmp/l.rec TEST_GEN=$gen LD_PRELOAD=$lib \
                "$prog" private > "$tmp/out" 2>&1 || true
        fi
        past=$(sed -n 's/^process [0-9]*: \([0-9]*\) MiB admitted after the rewrite.*/\1/p' "$tmp/out" | awk '{s+=$1} END {print s+0}')
        line=$(grep -m1 '^before ' "$tmp/out" || true)
        charged=$(sed -n 's/.* charged \([0-9]*\) while above for \([0-9]*\) ms.*/\1/p' <<< "$line")
        for_ms=$(sed -n 's/.* charged \([0-9]*\) while above for \([0-9]*\) ms.*/\2/p' <<< "$line")
        [ $gen = 2 ] && past="-" # not measured there: a spare taken and given many times over
        printf '%-8s %-8s %18s %18s %14s\n' $budget $name "$past" "${charged:-?}" "${for_ms:-?}"
    done
done
# set-memory: from the command's start to its exit 0 (in force), against a process allocating
# every 100 ms under its own 256 MiB.
rm -f "$tmp"/l*
env GPUCAP_LEDGER=$tmp/s GPUCAP_MEMORY_LIMIT=256MiB LD_PRELOAD=$lib $build/tests/cli_alloc \
    $(for i in $(seq 60); do printf 'a1 s1 '; done) > /dev/null 2>&1 &
pid=$!
sleep 0.5
t0=$(date +%s%N)
"$build/tools/gpucap/gpucap" set-memory --ledger "$tmp/s" --wait 5 64MiB > "$tmp/sm" 2>&1 && rc=0 || rc=$?
t1=$(date +%s%N)
kill $pid 2> /dev/null || true
wait $pid 2> /dev/null || true
printf 'set-memory: exit %d after %.1f ms (%s)\n' $rc "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print (b-a)/1e6}')" "$(head -1 "$tmp/sm")"
