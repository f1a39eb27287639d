#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_run.sh GPUCAP CLI_ALLOC: `gpucap run`: the exit status and the signal of the command
# pass through, signals sent to gpucap reach the command, an existing LD_PRELOAD is kept after the
# library, the run has a ledger of its own (removed afterwards), usage errors, --help generated
# from the options table.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"

"$gpucap" run -- sh -c 'exit 7'; rc=$?
[ $rc = 7 ] || bad "exit status: got $rc, want 7"
"$gpucap" run -- true || bad "exit status 0"

# The command dies of SIGTERM: gpucap dies of SIGTERM too (the shell sees 128+15).
"$gpucap" run -- sh -c 'kill -TERM $$'; rc=$?
[ $rc = 143 ] || bad "signal pass-through: got $rc, want 143"
"$gpucap" run -- sh -c 'kill -KILL $$'; rc=$?
[ $rc = 137 ] || bad "SIGKILL pass-through: got $rc, want 137"

# A signal sent to gpucap is forwarded to the command, which handles it (USR1) or dies of it (TERM).
# forwarded SIGNAL WANT [SETUP]: gpucap runs a shell that runs SETUP, says it is ready and loops;
# SIGNAL sent to gpucap then, the exit status is WANT.
forwarded() {
    local pid rc
    rm -f "$t/ready"
    "$gpucap" run -- sh -c "${3:-} echo ready > $t/ready; while :; do sleep 0.05; done" &
    pid=$!
    waitfor test -s "$t/ready"
    kill -"$1" $pid
    wait $pid; rc=$?
    [ $rc = "$2" ] || bad "SIG$1 forwarding: got $rc, want $2"
}
forwarded USR1 42 'trap "exit 42" USR1;'
forwarded TERM 143

# LD_PRELOAD: the library first, what was there kept; the library is really loaded.
other=$(dirname "$alloc")/libprobe_a.so
LD_PRELOAD="$other" "$gpucap" run -- sh -c 'echo "$LD_PRELOAD"' > "$t/pre"
case "$(cat "$t/pre")" in
    */libgpucap.so:"$other") ;;
    *) bad "LD_PRELOAD kept: got '$(cat "$t/pre")'" ;;
esac
LD_PRELOAD="$other" "$gpucap" run -- sh -c 'grep -c "libgpucap.so\|libprobe_a.so" /proc/$$/maps | grep -q . && grep -q libgpucap.so /proc/$$/maps && grep -q libprobe_a.so /proc/$$/maps' ||
    bad "both libraries mapped in the command"

# A private ledger for the run, shared by its children, removed afterwards.
"$gpucap" run -- sh -c 'echo "$GPUCAP_LEDGER"' > "$t/ledger"
l=$(cat "$t/ledger")
case "$l" in /*/gpucap-run.*/ledger) ;; *) bad "ledger path: '$l'" ;; esac
[ -e "$l" ] || [ -e "$(dirname "$l")" ] && bad "ledger left behind: $l"
# The budget holds across the processes of the run: 40 + 40 MiB > 64 MiB.
"$gpucap" run --memory 64MiB -- "$alloc" a40 c:a40 F > "$t/out" 2> "$t/err"
grep -q "results=1" "$t/out" || bad "budget shared by the run's processes: $(cat "$t/out" "$t/err")"
"$gpucap" run --memory 100MiB -- "$alloc" a40 c:a40 F > "$t/out" 2>&1
[ "$(grep -c 'results=0' "$t/out")" = 2 ] || bad "within budget: $(cat "$t/out")"
"$gpucap" run --device-memory 0=32MiB -- "$alloc" a33 > "$t/out" 2>&1
grep -q "results=1" "$t/out" || bad "--device-memory: $(cat "$t/out")"

# Usage errors.
"$gpucap" run --memory lots -- true 2> "$t/err"; rc=$?
[ $rc = 125 ] && grep -q "'lots' is not a size" "$t/err" || bad "bad --memory: rc $rc $(cat "$t/err")"
"$gpucap" run 2> /dev/null; [ $? = 125 ] || bad "no command: want 125"
"$gpucap" run -- /nonexistent/cmd 2> /dev/null; rc=$?
[ $rc = 127 ] || bad "missing command: got $rc, want 127"
"$gpucap" run --lib /nonexistent.so -- true 2> "$t/err"; rc=$?
[ $rc = 125 ] && grep -q "not found" "$t/err" || bad "--lib missing: rc $rc (gpucap's own failure: 125)"

# --help for every command, and every setting of the table in it.
"$gpucap" --help > "$t/help" || bad "--help"
for env in $(grep -o '"GPUCAP_[A-Z_]*"' "$TEST_SOURCE/libgpucap/common/options.c" | tr -d '"' | sort -u); do
    grep -q "^  $env" "$t/help" || bad "--help lacks $env"
done
for cmd in run check doctor status; do
    "$gpucap" $cmd --help > "$t/h" && grep -q "usage: gpucap $cmd" "$t/h" && grep -q 'gpucap --help' "$t/h" ||
        bad "$cmd --help"
done
"$gpucap" frobnicate 2> /dev/null; [ $? = 2 ] || bad "unknown command: want 2"
exit $fail
