#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_ledger_files.sh: ledgers that cannot be used (garbage, truncated, another layout version, not
# writable, a symlink, an impossible path, another user's file) each give one error line naming the
# file and the reason, leave the file as it was, and the process is still capped (private budget).
set -u
. "$(dirname "$0")/../common.sh"
. "$(dirname "$0")/ledger_refused.sh"

run "$t/good.ledger" $MiB
[ -s "$t/good.ledger" ] || { echo "FAIL: no ledger created"; exit 1; }
grep -q . "$t/err" && { echo "FAIL: a good ledger printed something:"; cat "$t/err"; fail=1; }

head -c 65536 /dev/urandom > "$t/garbage.ledger" && chmod 600 "$t/garbage.ledger"
check garbage "$t/garbage.ledger" "not a gpucap ledger"
cp "$t/good.ledger" "$t/short.ledger" && truncate -s 4000 "$t/short.ledger"
check truncated "$t/short.ledger" "truncated"
cp "$t/good.ledger" "$t/empty.ledger" && truncate -s 0 "$t/empty.ledger"
check empty "$t/empty.ledger" "truncated"
cp "$t/good.ledger" "$t/v99.ledger" && printf '\x63\x00\x00\x00' | dd of="$t/v99.ledger" bs=1 seek=8 conv=notrunc 2>/dev/null
check version "$t/v99.ledger" "layout version 99, this gpucap reads version 8"
mkdir "$t/dir.ledger"
check directory "$t/dir.ledger" "cannot be opened for writing"
ln -s "$t/good.ledger" "$t/link.ledger"
check symlink "$t/link.ledger" "cannot be opened for writing"
check nodir "$t/no/such/dir.ledger" "cannot be created"
if [ "$(id -u)" = 0 ]; then
    cp "$t/good.ledger" "$t/theirs.ledger" && chown 65534 "$t/theirs.ledger"
    check foreign "$t/theirs.ledger" "belongs to uid 65534"
fi
[ $fail = 0 ] && echo "ledger files: every unusable ledger was reported and the process stayed capped"
exit $fail
