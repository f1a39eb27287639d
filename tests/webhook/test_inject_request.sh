#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_inject_request.sh GPUCAP: `gpucap inject` with a request (issue 35): CONTAINER=LIMIT,request=R
# writes memory_request = R into that container's locked ini (and nothing into the others'), a
# request above the limit or --max, a malformed request and a stray suffix are usage errors that
# write nothing.
set -u
gpucap=$1
. "$(dirname "$0")/../common.sh"

mkdir "$t/vol"
out=$("$gpucap" inject --to "$t/vol" --max 60GiB nb=40GiB,request=10GiB serve=40GiB be=50%,request=0 2>&1) ||
    bad "inject: $out"
ini=$(grep -v '^;' "$t/vol/nb/gpucap.ini")
want="[gpucap]
lock = true
memory_limit = 40GiB
memory_limit_max = 60GiB
memory_request = 10GiB
ledger = /run/gpucap/ledger/gpucap.ledger"
[ "$ini" = "$want" ] || bad "nb's ini: $ini"
grep -q memory_request "$t/vol/serve/gpucap.ini" && bad "serve asked for no request: guaranteed, no memory_request"
grep -q '^memory_request = 0$' "$t/vol/be/gpucap.ini" || bad "be's request 0 (best effort): $(cat "$t/vol/be/gpucap.ini")"
grep -q '^; ceiling = 60GiB' "$t/vol/nb/gpucap.ini" || bad "the ceiling line stays --max"
case $out in *"nb: memory_limit 40GiB, memory_request 10GiB"*) ;; *) bad "inject says the request: $out" ;; esac

for arg in nb=8GiB,request=9GiB nb=100%,request=70GiB nb=8GiB,request=lots nb=8GiB,limit=4GiB nb=8GiB,request= \
           "nb=50%,request=60%" ; do
    mkdir "$t/none"
    "$gpucap" inject --to "$t/none" --max 64GiB "$arg" > "$t/out" 2>&1
    rc=$?
    [ $rc = 2 ] || bad "$arg: exit $rc (want 2): $(cat "$t/out")"
    [ -z "$(ls -A "$t/none")" ] || bad "$arg: files written: $(ls -A "$t/none")"
    rm -rf "$t/none"
done
"$gpucap" inject --to "$t/vol" --max 64GiB nb=8GiB,request=9GiB 2>&1 | grep -q "request 9GiB above the limit 8GiB" ||
    bad "the refusal names the request and the limit"
"$gpucap" inject --to "$t/vol" --max 64GiB nb=100%,request=70GiB 2>&1 | grep -q "above --max 64GiB" ||
    bad "the refusal names --max"
[ $fail = 0 ] && echo "ok: gpucap inject with requests"
exit $fail
