#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_hygiene.sh before|after STATE: the suite leaves nothing outside its scratch directories. Run
# first ("before", a fixture's setup) it notes the default ledgers of every user (/tmp/gpucap-<uid>.ledger,
# what a process without GPUCAP_LEDGER attaches to) with their change times; run last ("after", the
# fixture's cleanup) it fails for one that appeared or changed meanwhile: a test wrote where a user's
# own `gpucap status` and `gpucap set-memory` look.
set -u
state=${2:?usage: test_hygiene.sh before|after STATE}
list() { for f in /tmp/gpucap-[0-9]*.ledger; do [ -e "$f" ] && stat -c '%n %Z' "$f"; done; return 0; }
case $1 in
before) list > "$state"; echo "hygiene: $(wc -l < "$state") default ledger(s) before the suite" ;;
after)
    [ -f "$state" ] || { echo "hygiene: no state from before (run the whole suite)"; exit 77; }
    new=$(comm -13 <(sort "$state") <(list | sort))
    rm -f "$state"
    if [ -n "$new" ]; then
        echo "FAIL: the suite wrote a user's default ledger (name and change time): $new"
        echo "(a CUDA process outside the suite, or another test run on this machine, would count too: run the suite alone)"
        exit 1
    fi
    echo "hygiene: no default ledger written" ;;
*) echo "usage: test_hygiene.sh before|after STATE"; exit 2 ;;
esac
