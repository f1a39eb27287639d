#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_ledger_planted.sh: ledgers another user could have planted or could still reach are refused,
# with one error line naming the file and the reason, the file left as it was, and the process
# still capped (private budget): a file open to every user (0666, also in group mode), a file of
# another user in group mode whose group is not one of ours, a file with a second name (hard link).
# A group-mode file of another user in one of our groups (0660) is still shared.
set -u
. "$(dirname "$0")/../common.sh"
. "$(dirname "$0")/ledger_refused.sh"

run "$t/good.ledger" $MiB
[ -s "$t/good.ledger" ] || { echo "FAIL: no ledger created"; exit 1; }

cp -p "$t/good.ledger" "$t/open.ledger" && chmod 666 "$t/open.ledger"
check open "$t/open.ledger" "is open to every user (mode 0666)"
GROUP=1 check open_group "$t/open.ledger" "is open to every user (mode 0666)"
cp -p "$t/good.ledger" "$t/read.ledger" && chmod 604 "$t/read.ledger"
check other_read "$t/read.ledger" "is open to every user (mode 0604)"
cp -p "$t/good.ledger" "$t/one.ledger" && ln "$t/one.ledger" "$t/two.ledger"
check hardlink "$t/one.ledger" "has 2 names (hard links)"
if [ "$(id -u)" = 0 ]; then
    # Planted by another user (65534) for group mode: its group is not one of ours.
    cp "$t/good.ledger" "$t/planted.ledger" && chown 65534:65534 "$t/planted.ledger" && chmod 660 "$t/planted.ledger"
    GROUP=1 check planted "$t/planted.ledger" "belongs to uid 65534 and group 65534: neither this user nor a group"
    cp "$t/good.ledger" "$t/planted666.ledger" && chown 65534:65534 "$t/planted666.ledger" &&
        chmod 666 "$t/planted666.ledger"
    GROUP=1 check planted666 "$t/planted666.ledger" "belongs to uid 65534 and group 65534"
    # Another user's, in our group, group-writable: shared as before.
    cp "$t/good.ledger" "$t/ours.ledger" && chown 65534:"$(id -g)" "$t/ours.ledger" && chmod 660 "$t/ours.ledger"
    GROUP=1 run "$t/ours.ledger" $MiB
    grep -q . "$t/err" && { echo "FAIL group: a ledger of our group was refused:"; cat "$t/err"; fail=1; }
fi
[ $fail = 0 ] && echo "planted ledgers: every one was refused and the process stayed capped"
exit $fail
