#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_status.sh GPUCAP CLI_ALLOC: `gpucap status`: devices by UUID with budget, use and peak;
# the part of the use that context reserves make up; the identity block (pod, container, version);
# processes alive and dead; JSON; a corrupted, truncated or foreign ledger is one line, exit 1.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
export GPUCAP_LEDGER=$t/ledger

GPUCAP_CONTEXT_RESERVE=8MiB GPUCAP_POD_NAMESPACE=team-a GPUCAP_POD_NAME=train-0 \
    GPUCAP_POD_UID=0c5e2d4a-1111-4222-8333-444455556666 GPUCAP_CONTAINER_NAME=main \
    LD_PRELOAD=$TEST_PRELOAD "$alloc" a24 s30 F > /dev/null 2>&1 &
pid=$!
in_use() { "$gpucap" status > "$t/out" 2> /dev/null && grep -q "in use $1" "$t/out"; }
waitfor in_use "32.00 MiB"
grep -qE "^device GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}( \(GPU [0-9]+, [^)]*\))?  budget 64.00 MiB  in use 32.00 MiB \(contexts 8.00 MiB\)  peak 32.00 MiB" "$t/out" ||
    bad "device line: $(cat "$t/out")"
grep -qE "^$pid +cli_alloc +[0-9]+ s +yes +GPU-.* +32.00 MiB +32.00 MiB$" "$t/out" || bad "live process line: $(cat "$t/out")"
grep -qx "pod team-a/train-0 (uid 0c5e2d4a-1111-4222-8333-444455556666)  container main  written by gpucap [0-9.]*" \
    "$t/out" || bad "identity line: $(cat "$t/out")"
"$gpucap" status --json --ledger "$GPUCAP_LEDGER" > "$t/j"
python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
assert d['devices'][0]['in_use']==32<<20 and d['devices'][0]['contexts']==8<<20 and d['devices'][0]['budget']==64<<20, d
assert any(p['pid']==int(sys.argv[2]) and p['alive'] for p in d['processes']), d
i=d['identity']
assert (i['namespace'],i['pod'],i['container'])==('team-a','train-0','main') and i['gpucap_version'], i
" "$t/j" $pid || bad "json: $(cat "$t/j")"
kill -KILL $pid; wait $pid 2> /dev/null
"$gpucap" status > "$t/out"
grep -qE "^$pid +\? +\? +no " "$t/out" || bad "dead process: $(cat "$t/out")"

head -c 100 /dev/urandom > "$t/junk"
"$gpucap" status --ledger "$t/junk" > "$t/out" 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "not a gpucap ledger" "$t/err" && [ "$(wc -l < "$t/err")" = 1 ] || bad "junk: rc $rc $(cat "$t/err")"
head -c 4096 "$GPUCAP_LEDGER" > "$t/short"
"$gpucap" status --ledger "$t/short" 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "truncated" "$t/err" || bad "truncated: rc $rc $(cat "$t/err")"
# A device entry in no state the library writes (offset 696: dev[0].state of layout 3): the same
# check as the library's, one line.
cp "$GPUCAP_LEDGER" "$t/baddev" && printf '\x07' | dd of="$t/baddev" bs=1 seek=696 conv=notrunc 2>/dev/null
"$gpucap" status --ledger "$t/baddev" > "$t/out" 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "corrupted device entry 0" "$t/err" && [ "$(wc -l < "$t/err")" = 1 ] ||
    bad "bad device entry: rc $rc $(cat "$t/err")"
cp "$GPUCAP_LEDGER" "$t/v99" && printf '\x63' | dd of="$t/v99" bs=1 seek=8 conv=notrunc 2>/dev/null
"$gpucap" status --ledger "$t/v99" 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "layout version 99, this gpucap reads version" "$t/err" || bad "v99: rc $rc $(cat "$t/err")"
# Without --ledger, the settings name it: the ini file's `ledger` as well as GPUCAP_LEDGER.
printf '[gpucap]\nledger = %s\n' "$GPUCAP_LEDGER" > "$t/ini"
env -u GPUCAP_LEDGER GPUCAP_CONFIG="$t/ini" "$gpucap" status > "$t/out" 2> "$t/err"; rc=$?
[ $rc = 0 ] && grep -qF "ledger $GPUCAP_LEDGER" "$t/out" || bad "ledger from the ini file: rc $rc $(cat "$t/err")"
GPUCAP_LEDGER=off "$gpucap" status 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "no ledger to show" "$t/err" || bad "off: rc $rc $(cat "$t/err")"
"$gpucap" status --ledger "$t/none" 2> "$t/err"; rc=$?
[ $rc = 1 ] && grep -q "cannot be opened" "$t/err" || bad "missing: rc $rc"
exit $fail
