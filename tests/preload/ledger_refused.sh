# SPDX-License-Identifier: Apache-2.0
# ledger_refused.sh: what the tests of ledgers the library must refuse share (test_ledger_files.sh,
# test_ledger_planted.sh); sourced after ../common.sh.
probe=$TEST_BUILD/tests/probe_budget

# run LEDGER BYTES: probe_budget under the library asks for BYTES with LEDGER as its ledger (GROUP=1:
# in group mode); output in $t/out and $t/err.
run() {
    GPUCAP_LEDGER_GROUP=${GROUP:-0} GPUCAP_LEDGER="$1" LD_PRELOAD="$TEST_PRELOAD" "$probe" 0 "$2" \
        > "$t/out" 2> "$t/err"
}

# check NAME LEDGER REASON: LEDGER is refused with one error line naming it and REASON, the process
# is capped all the same (a private budget: 65 MiB of 64 denied, 1 MiB admitted), and the file is
# left as it was.
check() {
    local sum_before sum_after
    sum_before=$(md5sum "$2" 2> /dev/null)
    run "$2" $((65 * MiB))
    grep -qF "gpucap: error: ledger $2: $3" "$t/err" && grep -q "private budget" "$t/err" ||
        { echo "FAIL $1: no clear error"; cat "$t/err"; fail=1; }
    grep -q "alloc=2$" "$t/out" || { echo "FAIL $1: not capped"; cat "$t/out"; fail=1; }
    run "$2" $MiB
    grep -q "alloc=0$" "$t/out" || { echo "FAIL $1: the private budget does not admit"; cat "$t/out"; fail=1; }
    sum_after=$(md5sum "$2" 2> /dev/null)
    [ "$sum_before" = "$sum_after" ] || { echo "FAIL $1: the file was changed"; fail=1; }
}
