#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_status_more.sh GPUCAP CLI_ALLOC: `gpucap status` tells what a person asks: the command
# name (/proc/<pid>/comm) and age of each process, the ledger's path and where it came from, how
# old a ledger no live process uses is; a device peak never below what is in use (two processes
# each below their own peak); "1 denial", singular. And it takes the ledger file as hostile: a FIFO
# planted at the path does not hang it, a symbolic link is not followed, a ledger truncated while
# it reads is no SIGBUS.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
export GPUCAP_LEDGER=$t/ledger

# Two processes of one ledger hold 24 MiB each at once (48 MiB in use; each one's own peak 24).
LD_PRELOAD=$TEST_PRELOAD "$alloc" a24 s40 F > /dev/null 2>&1 &
p1=$!
LD_PRELOAD=$TEST_PRELOAD "$alloc" a24 s40 F > /dev/null 2>&1 &
p2=$!
in_use() { "$gpucap" status > "$t/out" 2> /dev/null && grep -q "in use $1" "$t/out"; }
waitfor in_use "48.00 MiB"
grep -qE "in use 48.00 MiB \(contexts 0 B\)  peak 48.00 MiB" "$t/out" || bad "peak below use: $(cat "$t/out")"
grep -qE "^$p1 +cli_alloc +[0-9]+ s +yes " "$t/out" || bad "command and age of $p1: $(cat "$t/out")"
grep -qE "^pid +command +age +alive " "$t/out" || bad "header: $(cat "$t/out")"
grep -qF "ledger $t/ledger (GPUCAP_LEDGER), last written " "$t/out" || bad "ledger line: $(head -1 "$t/out")"
"$gpucap" status --json > "$t/j"
python3 - "$t/j" "$p1" <<'PY' || bad "json: $(cat "$t/j")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ledger_from"] == "GPUCAP_LEDGER" and d["live_processes"] == 2 and not d["stale"], d
dev = d["devices"][0]
assert dev["peak"] >= dev["in_use"] == 48 << 20, dev
p = [p for p in d["processes"] if p["pid"] == int(sys.argv[2])][0]
assert p["command"] == "cli_alloc" and p["age_seconds"] is not None, p
PY
wait $p1 $p2

# One denial is "1 denial".
LD_PRELOAD=$TEST_PRELOAD "$alloc" a40 a40 F > /dev/null 2>&1
"$gpucap" status > "$t/out"
grep -q "1 denial)" "$t/out" || bad "singular: $(grep denial "$t/out")"

# A process killed holding memory and its context's reserve: the driver freed both, so neither the
# device line (use, contexts) nor its own row shows them in use before the library's next reap.
GPUCAP_CONTEXT_RESERVE=16MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" a20 s100 F > /dev/null 2>&1 &
p3=$!
waitfor in_use "36.00 MiB"
kill -9 $p3
wait $p3 2> /dev/null
"$gpucap" status > "$t/out"
grep -qE "in use 0 B \(contexts 0 B\)" "$t/out" || bad "a killed process's use or reserve: $(cat "$t/out")"
grep -qE "^$p3 +\S+ +\S+ +no +\S+ +0 B +36.00 MiB$" "$t/out" || bad "the killed process's row: $(cat "$t/out")"

# A ledger nobody uses any more: stale, and how old.
touch -d '3 hours ago' "$GPUCAP_LEDGER"
"$gpucap" status > "$t/out"
head -1 "$t/out" | grep -qE "last written [0-9]+ (s|min|h) ago; stale: no live process uses it" ||
    bad "stale ledger: $(head -1 "$t/out")"
# Without any ledger setting, the default path is said to be the default.
env -u GPUCAP_LEDGER "$gpucap" status --json > "$t/j" 2> "$t/err"
grep -q "the default: GPUCAP_LEDGER is not set" "$t/j" "$t/err" || bad "default path not said: $(cat "$t/j" "$t/err")"

# A FIFO in place of the ledger: no hang, one line, exit 1.
mkfifo "$t/fifo"
timeout 5 "$gpucap" status --ledger "$t/fifo" > /dev/null 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "not a regular file" "$t/err" || bad "FIFO: rc $rc $(cat "$t/err")"
# A socket or a directory likewise (opening a socket fails before its type can be seen).
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$t/sock"
mkdir "$t/dir"
for f in sock dir; do
    timeout 5 "$gpucap" status --ledger "$t/$f" > /dev/null 2> "$t/err"; rc=$?
    [ $rc = 1 ] && grep -q "not a regular file" "$t/err" || bad "$f: rc $rc $(cat "$t/err")"
done
# A symbolic link is not followed.
ln -s "$GPUCAP_LEDGER" "$t/link"
"$gpucap" status --ledger "$t/link" > /dev/null 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "symbolic link" "$t/err" || bad "link: rc $rc $(cat "$t/err")"

# Truncated under the reader: a writer cuts the file and puts it back while status reads it.
cp "$GPUCAP_LEDGER" "$t/whole"
cp "$t/whole" "$t/cut"
(while :; do truncate -s 4096 "$t/cut"; cat "$t/whole" > "$t/cut"; done) 2> /dev/null &
cutter=$!
sigbus=0
for _ in $(seq 200); do
    "$gpucap" status --ledger "$t/cut" > /dev/null 2>&1
    rc=$?
    [ $rc -gt 128 ] && sigbus=$((sigbus + 1))
done
kill $cutter; wait $cutter 2> /dev/null
[ $sigbus = 0 ] || bad "status died of a signal $sigbus times in 200 while the ledger was truncated"
exit $fail
