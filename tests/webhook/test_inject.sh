#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_inject.sh GPUCAP: `gpucap inject`, the init container's copy tool: the files of contract 2
# (library, CLI, ld.so.preload, one locked ini per container, ledger directories) with their modes,
# the ini read back by `gpucap check`, and usage errors that write nothing.
set -u
gpucap=$1
. "$(dirname "$0")/../common.sh"

mkdir "$t/vol" "$t/led"
out=$("$gpucap" inject --to "$t/vol" --ledgers "$t/led" --max 50% train=8GiB serve=25% 2>&1) || bad "inject: $out"
for f in lib/libgpucap.so bin/gpucap ld.so.preload train/gpucap.ini serve/gpucap.ini; do
    [ -f "$t/vol/$f" ] || bad "missing $f"
done
[ "$(stat -c %a "$t/vol/lib/libgpucap.so")" = 755 ] || bad "library mode"
[ "$(stat -c %a "$t/vol/train/gpucap.ini")" = 644 ] || bad "ini mode"
# The ledgers are the platform's: a directory of this user that no other user can write, holding
# a whole ledger every user of the container can read and write; a second run keeps it.
[ "$(stat -c %a "$t/led/train")" = 755 ] || bad "ledger directory mode $(stat -c %a "$t/led/train")"
[ "$(stat -c %a:%u "$t/led/train/gpucap.ledger")" = "666:$(id -u)" ] ||
    bad "ledger mode/owner $(stat -c %a:%u "$t/led/train/gpucap.ledger")"
[ "$(head -c 8 "$t/led/serve/gpucap.ledger")" = '!GPCLDGR' ] || bad "serve's ledger is not a ledger"
[ "$(cat "$t/vol/ld.so.preload")" = /usr/local/gpucap/lib/libgpucap.so ] || bad "ld.so.preload: $(cat "$t/vol/ld.so.preload")"
cmp -s "$t/vol/bin/gpucap" "$gpucap" || bad "the CLI copied"
"$t/vol/bin/gpucap" --version >/dev/null || bad "the copied CLI runs"
ini=$(grep -v '^;' "$t/vol/train/gpucap.ini")
want="[gpucap]
lock = true
memory_limit = 8GiB
memory_limit_max = 50%
ledger = /run/gpucap/ledger/gpucap.ledger"
[ "$ini" = "$want" ] || bad "train's ini: $ini"
grep -q '^memory_limit = 25%$' "$t/vol/serve/gpucap.ini" || bad "serve's budget"
ino=$(stat -c %i "$t/led/train/gpucap.ledger")
"$gpucap" inject --to "$t/vol" --ledgers "$t/led" train=8GiB > /dev/null || bad "inject again"
[ "$(stat -c %i "$t/led/train/gpucap.ledger")" = "$ino" ] || bad "a second run replaced the ledger"
ln -s /dev/null "$t/led/serve/x" && mv -f "$t/led/serve/x" "$t/led/serve/gpucap.ledger"
"$gpucap" inject --to "$t/vol" --ledgers "$t/led" serve=1GiB > /dev/null 2>&1 && bad "a symlink in place was kept"
# Without --max there is no memory_limit_max line.
mkdir "$t/v2"
"$gpucap" inject --to "$t/v2" a=1GiB >/dev/null || bad "inject without --max"
grep -q memory_limit_max "$t/v2/a/gpucap.ini" && bad "memory_limit_max without --max"
grep -q '^lock = true$' "$t/v2/a/gpucap.ini" || bad "lock without --max"
# The ini is the library's: gpucap check takes its ledger line from it.
env -i "$gpucap" check "$t/v2/a/gpucap.ini" 2>&1 | grep -q "ledger .*/run/gpucap/ledger/gpucap.ledger .*gpucap.ini:" ||
    bad "gpucap check reads the ini"

# Usage errors: nothing written.
mkdir "$t/v3"
for args in "a=lots" "--max 4GiB a=8GiB" "Bad_Name=1GiB" "a" "--max" ""; do
    # shellcheck disable=SC2086
    "$gpucap" inject --to "$t/v3" $args >/dev/null 2>&1; rc=$?
    [ $rc = 2 ] || bad "'$args': exit $rc, want 2"
done
[ -z "$(ls "$t/v3")" ] || bad "a usage error wrote files: $(ls "$t/v3")"
"$gpucap" inject --to "$t/missing/dir" a=1GiB >/dev/null 2>&1 && bad "a missing directory is a failure"
"$gpucap" inject --help | grep -q "CONTAINER=SIZE" || bad "--help"
[ $fail = 0 ] && echo "ok: gpucap inject"
exit $fail
