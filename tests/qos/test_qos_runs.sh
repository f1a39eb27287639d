#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_qos_runs.sh MODE AGENT GPUCAP LIB CLI_ALLOC: several `gpucap run --memory-request` jobs on ONE
# fake card (FAKECUDA_RECORD shared: the card's one record, NVML's per-process figures from it) under
# `gpucap-agent --local`, end to end: the library asks, the arbiter lends and takes back.
#   borrow    a best-effort job (request 0) borrows up to its limit, loan by loan, beside a guaranteed
#             one; its report and the files say it
#   reclaim   a guaranteed job arriving while a borrower fills the card gets its request within the
#             grace + 1 s: the borrower's process SIGKILLed (its gpucap dies of it), the card never
#             above its size
#   victim    two borrowers: the best-effort one is the victim, not the burstable one further above
#             its request
#   deny      reclaim = deny: nothing killed, the guaranteed job's allocation refused after the wait
#   noarbiter no arbiter: a best-effort job borrows nothing (its allocation refused at once), nothing
#             is killed
#   limit     a loan never lets a job past its limit (--memory), however much is lendable
set -u
mode=$1 agent=$2 gpucap=$3 lib=$4 alloc=$5
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
grep -aq memory_request "$lib" || { echo "SKIP: this library has no memory_request (issue 35's library part)"; exit 77; }
export XDG_RUNTIME_DIR=$t/xdg FAKECUDA_RECORD=$t/record FAKECUDA_MEM=1GiB GPUCAP_CONFIG=/dev/null
unset GPUCAP_MEMORY_LIMIT GPUCAP_LEDGER
mkdir -m 700 "$t/xdg"
base=$XDG_RUNTIME_DIR/gpucap
GRACE=${GRACE:-1}
arbiter() {
    "$agent" --local --reclaim-grace "$GRACE" "$@" 2> "$t/agent.err" &
    apid=$!
    waitfor test -S "$base/arbiter.sock" || { bad "no socket: $(cat "$t/agent.err")"; exit 1; }
}
# job NAME REQUEST LIMIT OPS...: a gpucap run in the background, its pid in $job; output in $t/NAME.*
job() {
    local n=$1 r=$2 l=$3
    shift 3
    "$gpucap" run --lib "$lib" --memory-request "$r" --memory "$l" --report "$t/$n.report" -- "$alloc" "$@" \
        > "$t/$n.out" 2> "$t/$n.err" &
    job=$!
}
results() { sed -n 's/^results=//p' "$t/$1.out"; }
# The fake card's own peak (its record, every process's figures): never above its size.
peak() { env -u LD_PRELOAD "$alloc" p | sed -n 's/.*fake peak=\([0-9]*\).*/\1/p'; }

case $mode in
borrow)
    arbiter
    job g 300MiB 300MiB a250 s30
    g=$job
    job a 0 600MiB a100 a200 a200 s20
    a=$job
    wait $a
    [ $? = 0 ] && [ "$(results a)" = 000 ] || bad "the best-effort job did not borrow: $(cat "$t/a.out" "$t/a.err")"
    wait $g
    [ "$(results g)" = 0 ] || bad "the guaranteed job: $(cat "$t/g.out" "$t/g.err")"
    ;;
reclaim | victim | deny)
    arbiter --reclaim "$([ "$mode" = deny ] && echo deny || echo kill)"
    if [ "$mode" = victim ]; then
        job b 100MiB 1GiB a100 a300 s200 # burstable: 300 above its request
        b=$job
        sleep 1
    fi
    job a 0 1GiB a100 a$([ "$mode" = victim ] && echo 100 || echo 600) s200 # best effort: all of it borrowed
    a=$job
    sleep 1.5
    [ -n "$(ls "$base"/runs/*/gpucap.ini 2> /dev/null)" ] || bad "no registered run"
    t0=$(date +%s%N)
    job g 500MiB 500MiB a450
    g=$job
    wait $g
    rc=$?
    t1=$(date +%s%N)
    took=$(((t1 - t0) / 1000000))
    echo "guaranteed job done in $took ms (grace $GRACE s)"
    case $mode in
    reclaim | victim)
        [ $rc = 0 ] && [ "$(results g)" = 0 ] || bad "the request was not given back: $(cat "$t/g.out" "$t/g.err")"
        [ "$took" -le $((GRACE * 1000 + 1000 + 500)) ] || bad "took $took ms (grace $GRACE s + 1 s, and the job's start)"
        wait $a
        [ $? = 137 ] || bad "the best-effort borrower's gpucap did not die of SIGKILL"
        grep -q "GpuMemoryReclaimed: process [0-9]* of run" "$t/agent.err" || bad "not said: $(cat "$t/agent.err")"
        if [ "$mode" = victim ]; then
            kill -0 $b 2> /dev/null || bad "the burstable borrower was killed, not the best-effort one"
        fi
        ;;
    deny)
        [ "$(results g)" = 1 ] || bad "deny: the allocation was not refused: $(cat "$t/g.out")"
        kill -0 $a 2> /dev/null || bad "deny killed the borrower"
        grep -q "GpuMemoryNotReclaimed" "$t/agent.err" || bad "not said: $(cat "$t/agent.err")"
        ;;
    esac
    ;;
noarbiter)
    job a 0 1GiB a100 s10
    a=$job
    wait $a
    [ "$(results a)" = 1 ] || bad "a best-effort job borrowed without an arbiter: $(cat "$t/a.out")"
    job g 500MiB 500MiB a450
    wait $job
    [ "$(results g)" = 0 ] || bad "the guaranteed job: $(cat "$t/g.out" "$t/g.err")"
    ;;
limit)
    arbiter
    job a 0 300MiB a200 a90 a20 s5
    wait $job
    [ "$(results a)" = 001 ] || bad "past its limit: $(cat "$t/a.out" "$t/a.err")"
    ;;
*)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
# The card never held more than its size: the fake's record refuses past it (and its peak says it).
pk=$(peak)
[ -n "$pk" ] && [ "$pk" -le $((1024 * MiB)) ] || bad "the card's peak '$pk' above its size"
if [ -n "${apid:-}" ]; then
    kill $apid
    wait $apid
    rc=$?
    [ $rc = 0 ] || bad "the arbiter did not end cleanly ($rc): $(tail -3 "$t/agent.err")"
fi
[ $fail = 0 ] || { echo "--- agent:"; cat "$t/agent.err" 2> /dev/null; for f in "$t"/*.err; do echo "--- $f"; cat "$f"; done; }
exit $fail
