#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_qos_local.sh MODE AGENT CLI_ALLOC: `gpucap-agent --local` arbitrating members that share ONE
# fake card (FAKECUDA_RECORD: the card's record for every process, the fake NVML's per-process
# figures from it). Members are registered as `gpucap run --memory-request` registers a job (a
# directory under $XDG_RUNTIME_DIR/gpucap/runs with gpucap.ini, run, ledger); their memory is held by
# cli_alloc under the library (which maps the member's ledger: that is how the arbiter knows its
# processes); the loan channel is spoken by qos_client.py, a process mapping the member's ledger.
#   loan       a loan is granted from the lendable memory: memory_grant written in place in [gpucap]
#              (same inode, never shorter, the generation bumped after the text), qos.state and
#              cards.state say it; never beyond the limit
#   forged     a process of no member is refused (whatever pid its text says); a loan never takes a
#              guaranteed member's request, nor what was lent already; malformed requests, unknown cards
#   overcommit requests adding up past the card: the last scheduled is best effort (qos.state
#              overcommitted=1, an Event line), its need refused; a member's file without the arbiter's
#              reclaim_grace gets it
#   kill       a job arriving while loans fill the card: grants lowered at once (the files say 0), lending
#              stopped, and its
#              request back within the grace + 1 s by SIGKILL of the best-effort borrower (the rule's
#              victim, though a burstable one is further above its request), the others untouched
#   deny       the same with reclaim = deny: nothing killed, the need refused after the grace, counted
#   evict      reclaim = evict outside Kubernetes: SIGTERM to the victim's gpucap, counted
#   files      a settings file that is a symbolic link, a FIFO or has two links is never written; a
#              member whose gpucap is gone is no member
#   noarbiter  no arbiter: no socket, and nothing is killed however full the card
#   idle       a loan its member left unused (for a second) is lent to another that asks, the first
#              one's grant lowered to what it uses
#   promise    a loan not used yet that no longer fits beside a request (a job arrived) is taken back at
#              once, before anything is short: a loan never makes a request fail
#   orphan     a job whose gpucap is gone while a process of it still holds a loan: that process is
#              best effort, the victim before a burstable borrower
#   needclamp  a need claims at most the rest of its request: a forged huge one, with that rest free on
#              the card, is granted at once and takes nothing back (no reclaim, no kill)
set -u
mode=$1 agent=$2 alloc=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
export XDG_RUNTIME_DIR=$t/xdg FAKECUDA_RECORD=$t/record FAKECUDA_MEM=1GiB
mkdir -m 700 "$t/xdg"
base=$XDG_RUNTIME_DIR/gpucap runs=$XDG_RUNTIME_DIR/gpucap/runs
GRACE=${GRACE:-1}

start_of() { awk '{print $22}' "/proc/$1/stat"; }
# member NAME REQUEST LIMIT ORDER [ANCHOR_PID]: a registered job ("-" for no request: guaranteed).
member() {
    local d=$runs/$1 anchor=${5:-$$}
    mkdir -p "$d"
    {
        printf '; generation = 00000000000000000\n[gpucap]\nmemory_limit = %s\n' "$3"
        [ "$2" = - ] || printf 'memory_request = %s\n' "$2"
        [ -n "${NO_GRACE:-}" ] || [ "$2" = - ] || printf 'reclaim_grace = %s\n' "$GRACE"
    } > "$d/gpucap.ini"
    echo "$anchor $(start_of "$anchor")" > "$d/run"
    touch -d "@$((1700000000 + $4))" "$d/run" # the order it was scheduled in
}
# hold NAME MIB: a process of the member holding MIB on the card for up to 60 s; its pid in $held.
hold() {
    env GPUCAP_LEDGER="$runs/$1/ledger" GPUCAP_MEMORY_LIMIT=100% GPUCAP_CONFIG=/dev/null LD_PRELOAD="$TEST_PRELOAD" \
        "$alloc" "a$2" s600 > "$t/hold.$1.out" 2>&1 &
    held=$!
    waitfor test -s "$runs/$1/ledger" || bad "member $1's process made no ledger"
    sleep 0.5
}
arbiter() {
    "$agent" --local --reclaim-grace "$GRACE" "$@" 2> "$t/agent.err" &
    apid=$!
    waitfor test -S "$base/arbiter.sock" || { bad "no socket: $(cat "$t/agent.err")"; exit 1; }
    waitfor test -s "$base/cards.state" || bad "no cards.state"
    uuid=$(awk '{print $1; exit}' "$base/cards.state")
    sleep 0.3
}
# ask NAME VERB BYTES [client options]: qos_client.py as a process of member NAME; its lines in $t/ans.
ask() {
    local n=$1 v=$2 b=$3
    shift 3
    python3 "$here/qos_client.py" --map "$runs/$n/ledger" "$@" "$base/arbiter.sock" "$v" "$uuid" "$b" > "$t/ans"
}
answer() { tail -1 "$t/ans" | sed 's/ ms=.*//'; }
ms() { tail -1 "$t/ans" | sed 's/.* ms=//'; }
field() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" "$1"; }
MB=$MiB

case $mode in
loan)
    member a 64MiB 512MiB 1
    arbiter
    hold a 32
    ino=$(stat -c %i "$runs/a/gpucap.ini") size0=$(stat -c %s "$runs/a/gpucap.ini")
    ask a loan $((100 * MB))
    [ "$(answer)" = "granted $((164 * MB))" ] || bad "loan: $(cat "$t/ans")"
    echo "loan round trip: $(ms) ms"
    ini=$runs/a/gpucap.ini
    grep -qx "memory_grant = $((164 * MB))" "$ini" || bad "no grant in the file: $(cat "$ini")"
    [ "$(head -1 "$ini")" = "; generation = 00000000000000001" ] || bad "generation: $(head -1 "$ini")"
    [ "$(stat -c %i "$ini")" = "$ino" ] && [ "$(stat -c %s "$ini")" -ge "$size0" ] || bad "not rewritten in place"
    sed -n '/^\[gpucap\]/,/^\[/p' "$ini" | grep -q '^memory_grant' || bad "the grant is not in [gpucap]"
    sleep 0.4
    st=$runs/a/qos.state
    grep -q "^$uuid request=$((64 * MB)) limit=$((512 * MB)) grant=$((164 * MB)) used=$((32 * MB)) " "$st" ||
        bad "qos.state: $(cat "$st")"
    grep -q "^$uuid size=$((1024 * MB)) lendable=$((860 * MB)) loaned=$((100 * MB)) requested=$((64 * MB))$" \
        "$base/cards.state" || bad "cards.state: $(cat "$base/cards.state")"
    # Never beyond the limit.
    ask a loan $((1024 * MB))
    [ "$(answer)" = "granted $((512 * MB))" ] || bad "loan to the limit: $(cat "$t/ans")"
    ask a loan $((2 * MB))
    case $(answer) in "refused at its limit") ;; *) bad "beyond the limit: $(cat "$t/ans")" ;; esac
    [ "$(head -1 "$ini")" = "; generation = 00000000000000002" ] || bad "generation after two: $(head -1 "$ini")"
    ;;
forged)
    member g - 900MiB 1
    member a 0 1GiB 2
    arbiter
    hold g 10
    hold a 4
    # Not a process of a member: refused, whatever pid its text names.
    python3 "$here/qos_client.py" --pid-text "$held" "$base/arbiter.sock" loan "$uuid" $((50 * MB)) > "$t/ans"
    [ "$(answer)" = "refused not a process of a known container" ] || bad "stranger: $(cat "$t/ans")"
    # The guaranteed member's 900 MiB, used or not, is never lent: 124 MiB is all there is.
    ask a loan $((500 * MB))
    case $(answer) in "refused not enough lendable"*) ;; *) bad "another's request lent: $(cat "$t/ans")" ;; esac
    ask a loan $((100 * MB))
    [ "$(answer)" = "granted $((100 * MB))" ] || bad "the lendable: $(cat "$t/ans")"
    ask a loan $((100 * MB))
    case $(answer) in "refused not enough lendable"*) ;; *) bad "lent twice: $(cat "$t/ans")" ;; esac
    grep -qx "memory_grant = $((100 * MB))" "$runs/a/gpucap.ini" || bad "grant: $(cat "$runs/a/gpucap.ini")"
    ! grep -q memory_grant "$runs/g/gpucap.ini" || bad "the guaranteed member's file written"
    ask a borrow $((2 * MB))
    [ "$(answer)" = "refused malformed request" ] || bad "malformed: $(cat "$t/ans")"
    python3 "$here/qos_client.py" --map "$runs/a/ledger" "$base/arbiter.sock" loan GPU-00000000-0000-0000-0000-000000000000 \
        $MB > "$t/ans"
    [ "$(answer)" = "refused no such card here" ] || bad "card: $(cat "$t/ans")"
    ;;
overcommit)
    member a 600MiB 800MiB 1
    NO_GRACE=1 member b 600MiB 800MiB 2
    arbiter
    # The arbiter's grace given to a burstable member's library (how long it waits for a need).
    waitfor grep -qx "reclaim_grace = $GRACE" "$runs/b/gpucap.ini" || bad "no reclaim_grace: $(cat "$runs/b/gpucap.ini")"
    hold a 8
    hold b 8
    sleep 0.3
    grep -q "overcommitted=0$" "$runs/a/qos.state" || bad "a: $(cat "$runs/a/qos.state")"
    grep -q "overcommitted=1$" "$runs/b/qos.state" || bad "b, scheduled last: $(cat "$runs/b/qos.state")"
    grep -q "GpuRequestOvercommitted: run b " "$t/agent.err" || bad "not said: $(cat "$t/agent.err")"
    grep -q "requested=$((1200 * MB))$" "$base/cards.state" || bad "cards.state: $(cat "$base/cards.state")"
    ask b need $((100 * MB))
    case $(answer) in "refused best effort here"*) ;; *) bad "b's need: $(cat "$t/ans")" ;; esac
    ;;
kill | deny | evict)
    sleep 600 &
    anchor_a=$!
    sleep 600 &
    anchor_b=$!
    member a 0 1GiB 1 "$anchor_a"      # best effort
    member b 100MiB 1GiB 2 "$anchor_b" # burstable
    arbiter --reclaim "$mode"
    hold a 8
    ask a loan $((300 * MB))
    [ "$(answer)" = "granted $((300 * MB))" ] || bad "a's loan: $(cat "$t/ans")"
    hold b 8
    ask b loan $((400 * MB))
    [ "$(answer)" = "granted $((500 * MB))" ] || bad "b's loan: $(cat "$t/ans")"
    # What they hold with their loans: 300 MiB and 500 MiB (b is further above its request).
    hold a 290
    pid_a=$held
    hold b 490
    pid_b=$held
    # A guaranteed job arrives: 400 MiB of the card is its own; the loans no longer fit beside it.
    member g 400MiB 400MiB 3
    hold g 4
    sleep 0.5
    grep -qx "memory_grant = 0" "$runs/a/gpucap.ini" && grep -qx "memory_grant = 0" "$runs/b/gpucap.ini" ||
        bad "grants not lowered at once: $(grep memory_grant "$runs"/*/gpucap.ini)"
    # Lending stopped on the card while the reclaim lasts.
    ask b loan $((2 * MB))
    case $(answer) in "refused reclaiming"*) ;; *) bad "lent during a reclaim: $(cat "$t/ans")" ;; esac
    t0=$(date +%s%N)
    ask g need $((400 * MB)) --wait $((GRACE + 4))
    t1=$(date +%s%N)
    head -1 "$t/ans" | grep -q "^pending " || bad "no pending: $(cat "$t/ans")"
    case $mode in
    kill)
        [ "$(answer)" = "granted 0" ] || bad "the request not given back: $(cat "$t/ans")"
        took=$(((t1 - t0) / 1000000))
        echo "request back in $took ms (grace $GRACE s)"
        [ "$took" -le $((GRACE * 1000 + 1000)) ] || bad "took $took ms, more than the grace + 1 s"
        wait "$pid_a"
        [ $? = 137 ] || bad "the best-effort borrower was not SIGKILLed"
        kill -0 "$pid_b" 2> /dev/null || bad "the burstable borrower was killed too"
        sleep 0.3
        grep -q "reclaims_kill=1 " "$runs/a/qos.state" || bad "a's count: $(cat "$runs/a/qos.state")"
        grep -q "reclaims_kill=0 " "$runs/b/qos.state" || bad "b's count: $(cat "$runs/b/qos.state")"
        grep -q "GpuMemoryReclaimed: process $pid_a of run a" "$t/agent.err" || bad "not said: $(cat "$t/agent.err")"
        ;;
    deny)
        case $(answer) in refused*) ;; *) bad "deny: $(cat "$t/ans")" ;; esac
        kill -0 "$pid_a" 2> /dev/null && kill -0 "$pid_b" 2> /dev/null || bad "deny killed a borrower"
        sleep 0.3
        grep -q "reclaims_deny=1 " "$runs/a/qos.state" || bad "a's count: $(cat "$runs/a/qos.state")"
        grep -q "GpuMemoryNotReclaimed" "$t/agent.err" || bad "not said: $(cat "$t/agent.err")"
        ;;
    evict)
        wait "$anchor_a"
        [ $? = 143 ] || bad "the victim's gpucap was not sent SIGTERM"
        kill -0 "$pid_b" 2> /dev/null && kill -0 "$anchor_b" || bad "the burstable borrower was ended"
        sleep 0.3
        grep -q "reclaims_evict=1 " "$runs/a/qos.state" || bad "a's count: $(cat "$runs/a/qos.state")"
        grep -q "GpuMemoryReclaimed: run a .* evicted" "$t/agent.err" || bad "not said: $(cat "$t/agent.err")"
        ;;
    esac
    # The card never held more than its size (the fake's record refuses past it; its peak says).
    ;;
files)
    member a 0 1GiB 1
    member b 0 1GiB 2
    member c 0 1GiB 3
    member gone 0 1GiB 4
    echo "999999 1" > "$runs/gone/run"
    printf '[gpucap]\nmemory_limit = 1GiB\nmemory_request = 0\n' > "$t/target.ini"
    rm "$runs/a/gpucap.ini" && ln -s "$t/target.ini" "$runs/a/gpucap.ini"
    rm "$runs/b/gpucap.ini" && mkfifo "$runs/b/gpucap.ini"
    ln "$runs/c/gpucap.ini" "$t/second-link"
    arbiter
    hold a 4
    hold b 4
    hold c 4
    hold gone 4
    for m in a b c; do
        ask $m loan $((10 * MB)) --wait 2
        case $(answer) in refused*) ;; *) bad "member $m's file written: $(cat "$t/ans")" ;; esac
    done
    ! grep -q memory_grant "$t/target.ini" "$t/second-link" || bad "a file written through a link"
    ask gone loan $((10 * MB))
    [ "$(answer)" = "refused not a process of a known container" ] || bad "a member whose gpucap is gone: $(cat "$t/ans")"
    kill -0 "$apid" || bad "the arbiter died"
    ;;
noarbiter)
    member a 0 1GiB 1
    member g 900MiB 900MiB 2
    hold a 800
    pid_a=$held
    hold g 300 # does not fit: the card's driver refuses it; nobody takes anything
    sleep 1
    test -e "$base/arbiter.sock" && bad "a socket without an arbiter"
    kill -0 "$pid_a" || bad "killed without an arbiter"
    ;;
idle)
    member a 0 1GiB 1
    member b 0 1GiB 2
    arbiter
    hold a 8
    hold b 4
    ask a loan $((600 * MB))
    [ "$(answer)" = "granted $((600 * MB))" ] || bad "a's loan: $(cat "$t/ans")"
    ask b loan $((600 * MB))
    case $(answer) in "refused not enough lendable"*) ;; *) bad "lent twice at once: $(cat "$t/ans")" ;; esac
    sleep 1.2
    ask b loan $((600 * MB))
    [ "$(answer)" = "granted $((600 * MB))" ] || bad "the unused loan not lent again: $(cat "$t/ans")"
    grep -qx "memory_grant = $((8 * MB))" "$runs/a/gpucap.ini" || bad "a's grant: $(grep grant "$runs/a/gpucap.ini")"
    ;;
promise)
    member a 0 1GiB 1
    arbiter
    hold a 8
    ask a loan $((800 * MB))
    [ "$(answer)" = "granted $((800 * MB))" ] || bad "a's loan: $(cat "$t/ans")"
    member g 500MiB 500MiB 2
    hold g 4 # its card known (its ledger): its request counts there
    waitfor grep -qx "memory_grant = $((8 * MB))" "$runs/a/gpucap.ini" ||
        bad "the unused loan kept beside g's request: $(grep grant "$runs/a/gpucap.ini")"
    # The request is whole: 496 MiB more fit beside a's use.
    ask a loan $((600 * MB))
    case $(answer) in "refused not enough lendable"*) ;; *) bad "lent from g's request: $(cat "$t/ans")" ;; esac
    ! grep -q "reclaim (" "$t/agent.err" || bad "a reclaim where a loan was not used"
    ;;
orphan)
    sleep 600 &
    anchor_a=$!
    member a 0 1GiB 1 "$anchor_a"
    member b 100MiB 1GiB 2
    arbiter
    hold a 8
    ask a loan $((300 * MB))
    hold b 8
    ask b loan $((400 * MB))
    hold a 290
    pid_a=$held
    hold b 490
    pid_b=$held
    kill "$anchor_a" # its gpucap ends; its processes do not
    waitfor grep -q "run a (gpucap pid $anchor_a) ended; its processes still hold memory" "$t/agent.err" ||
        bad "not kept: $(cat "$t/agent.err")"
    ask a loan $((2 * MB))
    [ "$(answer)" = "refused its job ended" ] || bad "a departed job's loan: $(cat "$t/ans")"
    member g 400MiB 400MiB 3
    hold g 4
    ask g need $((400 * MB)) --wait $((GRACE + 4))
    [ "$(answer)" = "granted 0" ] || bad "the request not given back: $(cat "$t/ans")"
    wait "$pid_a"
    [ $? = 137 ] || bad "the departed job's process was not the victim"
    kill -0 "$pid_b" || bad "the burstable borrower was killed"
    ;;
needclamp)
    member a 0 1GiB 1
    member g 50MiB 50MiB 2
    arbiter
    hold a 8
    ask a loan $((950 * MB))
    [ "$(answer)" = "granted $((950 * MB))" ] || bad "a's loan: $(cat "$t/ans")"
    hold a 940
    pid_a=$held
    hold g 4
    ask g need $((1 << 40))
    [ "$(answer)" = "granted 0" ] || bad "the need: $(cat "$t/ans")"
    sleep $((GRACE + 1))
    kill -0 "$pid_a" || bad "a borrower killed for more than a request"
    grep -qx "memory_grant = $((950 * MB))" "$runs/a/gpucap.ini" || bad "a's loan taken back: $(grep grant "$runs/a/gpucap.ini")"
    ! grep -q "reclaim (" "$t/agent.err" || bad "a reclaim: $(cat "$t/agent.err")"
    ;;
*)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
if [ -n "${apid:-}" ]; then
    kill "$apid"
    wait "$apid"
    rc=$?
    [ $rc = 0 ] && grep -q "requests=" "$t/agent.err" || bad "the arbiter did not end cleanly ($rc): $(tail -3 "$t/agent.err")"
fi
[ $fail = 0 ] || { echo "--- agent:"; cat "$t/agent.err" 2> /dev/null; }
exit $fail
