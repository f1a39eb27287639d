#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_qos.sh GPUCAP CLI_ALLOC TEST_ARBITER: burstable memory (issue 35) as the tools show it. A
# `gpucap run` whose settings file says request 128 MiB, limit 512 MiB, with a test arbiter that lends:
# 128 MiB held, 64 MiB more is a loan. `gpucap status` (text and JSON) shows the request, the limit,
# the grant, what is loaned, the loans asked and the arbiter's change; the run's report (JSON, text)
# says the same, the budget change recorded as the arbiter's. `gpucap check` shows the figures in force.
set -u
gpucap=$1 alloc=$2 arbiter=$3
. "$(dirname "$0")/../common.sh"
unset GPUCAP_MEMORY_LIMIT GPUCAP_LEDGER XDG_RUNTIME_DIR
ini=$t/settings.ini sock=$t/arbiter.sock
export GPUCAP_CONFIG=$ini

start_arbiter() {
    rm -f "$sock"
    env -u LD_PRELOAD "$arbiter" "$sock" "$ini" grant $((128 * MiB)) $((512 * MiB)) "arbiter_socket = $sock" \
        > "$t/arb.out" 2> "$t/arb.err" &
    waitfor grep -q ready "$t/arb.out" || bad "the arbiter did not start: $(cat "$t/arb.err")"
}

run() { # run REPORT: the run in the background, its status taken while it sleeps
    local json=
    case $1 in *.json) json=--json ;; esac
    start_arbiter
    "$gpucap" run --lib "${TEST_PRELOAD##*:}" $json --report "$1" -- "$alloc" a128 a64 s15 > "$t/run.out" 2> "$t/run.err" &
    local pid=$!
    sleep 0.6
    "$gpucap" status --pid $pid > "$t/status" 2>&1
    "$gpucap" status --json --pid $pid > "$t/status.json" 2>&1
    wait $pid
    grep -q "results=00$" "$t/run.out" || bad "the run's allocations (the loan): $(cat "$t/run.out" "$t/run.err")"
    kill %1 2> /dev/null
    wait 2> /dev/null
}

run "$t/r.json"
python3 - "$t/r.json" "$t/status.json" <<'PY' || bad "JSON report / status: $(cat "$t/r.json" "$t/status.json")"
import json, sys
M = 1 << 20
r = json.load(open(sys.argv[1]))["devices"][0]
q = r["qos"]
assert q["burstable"] and q["request"] == 128 * M and q["limit"] == 512 * M and q["grant"] == 192 * M, q
assert q["loaned"] == 64 * M and q["loan_asks"] == 1 and q["arbiter_changes"] == 1 and q["loaned_peak"] == 64 * M, q
ch = r["budget_changes"]
assert [(c["from"], c["to"], c["by"]) for c in ch] == [(128 * M, 192 * M, "arbiter")], ch
s = json.load(open(sys.argv[2]))["devices"][0]
q = s["qos"]
assert q["burstable"] and q["request"] == 128 * M and q["grant"] == 192 * M and q["loaned"] == 64 * M, q
assert q["in_use_loaned"] == 64 * M and q["loan_asks"] == 1 and q["arbiter_changes"] == 1, q
assert s["budget_changed"]["by"] == "arbiter", s
PY
grep -qE "^  burstable: request 128.00 MiB  limit 512.00 MiB  grant 192.00 MiB  loaned 64.00 MiB \(in use above the request 64.00 MiB\)$" "$t/status" &&
    grep -qE "^  loans: 1 asked of the arbiter, peak loaned 64.00 MiB, 1 grant change by the arbiter \(0 taken back\)$" "$t/status" &&
    grep -qE "^  budget changed from 128.00 MiB to 192.00 MiB at .* \(arbiter\)" "$t/status" ||
    bad "status: $(cat "$t/status")"

run "$t/r.txt"
grep -qE "^  burstable +request 128.00 MiB, limit 512.00 MiB, grant 192.00 MiB \(loaned 64.00 MiB\)$" "$t/r.txt" &&
    grep -qE "^  loans +1 asked of the arbiter, peak loaned 64.00 MiB, 1 grant change by the arbiter \(0 taken back\)$" "$t/r.txt" &&
    grep -qE "128.00 MiB -> 192.00 MiB \(arbiter\)" "$t/r.txt" || bad "text report: $(cat "$t/r.txt")"

# Not burstable: nothing of it is shown.
GPUCAP_CONFIG=/dev/null "$gpucap" run --lib "${TEST_PRELOAD##*:}" -m 256MiB --report "$t/plain.txt" -- "$alloc" a64 > /dev/null 2>&1
GPUCAP_CONFIG=/dev/null "$gpucap" run --lib "${TEST_PRELOAD##*:}" -m 256MiB --json --report "$t/plain.json" -- "$alloc" a64 \
    > /dev/null 2>&1
grep -q "burstable\|loans" "$t/plain.txt" && bad "a plain run's report shows loans: $(cat "$t/plain.txt")"
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['devices'][0]['qos'] is None" "$t/plain.json" ||
    bad "a plain run's JSON qos: $(cat "$t/plain.json")"

# gpucap check: the figures in force, and a request above the limit refused (exit 1).
printf '[gpucap]\nmemory_limit = 512MiB\nmemory_request = 128MiB\nmemory_grant = 200MiB\n' > "$t/c.ini"
"$gpucap" check "$t/c.ini" > "$t/out" 2> "$t/err" || bad "check: $(cat "$t/out" "$t/err")"
expect "in force" "burstable: request 128.00 MiB, limit 512.00 MiB, grant 200.00 MiB: in force 200.00 MiB" out
printf '[gpucap]\nmemory_limit = 512MiB\n[device.0]\nmemory_request = 1GiB\n' > "$t/c.ini"
"$gpucap" check "$t/c.ini" > "$t/out" 2> "$t/err" && bad "check accepted a request above the limit"
expect "refused" "device 0: memory_request = 1GiB is above the limit" err
GPUCAP_MEMORY_GRANT=1GiB "$gpucap" check /dev/null > "$t/out" 2> "$t/err" && bad "check accepted GPUCAP_MEMORY_GRANT"
expect "file only" "GPUCAP_MEMORY_GRANT: memory_grant is read only from the platform file" err
exit $fail
