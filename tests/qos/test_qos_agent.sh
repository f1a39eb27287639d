#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_qos_agent.sh MODE AGENT CLI_ALLOC: the arbiter inside gpucap-agent on Kubernetes (--arbiter),
# against fake_apiserver.py (scenario qos) on a directory laid out like the kubelet's, two pods'
# containers on ONE fake card, each process under the library with its container's settings file and
# ledger (the library finds the arbiter's socket in its ledger directory, as in the container):
#   kill   the best-effort container borrows (loans through its own socket), the guaranteed one's
#          request is taken back by SIGKILL of the borrower's process; a Warning Event
#          GpuMemoryReclaimed on the borrower's pod; qos.state beside each settings file, cards.state
#          in --state-dir; nothing in the tenant's ledger directory is trusted (a forged socket there
#          is replaced)
#   evict  reclaim = evict: the Eviction API asked for the borrower's pod (policy/v1), and its Event
set -u
mode=$1 agent=$2 alloc=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
grep -aq memory_request "${TEST_PRELOAD##*:}" || { echo "SKIP: this library has no memory_request (issue 35's library part)"; exit 77; }
export FAKECUDA_RECORD=$t/record FAKECUDA_MEM=1GiB
unset GPUCAP_MEMORY_LIMIT
root=$t/pods
e_uid=0a0a0a0a-1111-4222-8333-000000000001 g_uid=0a0a0a0a-1111-4222-8333-000000000005
vol() { echo "$root/$1/volumes/kubernetes.io~empty-dir/$2/$3"; }
mkdir -p "$(vol $e_uid gpucap-lib train)" "$(vol $e_uid gpucap-ledger train)" "$(vol $g_uid gpucap-lib serve)" \
    "$(vol $g_uid gpucap-ledger serve)"
printf '; generation = 00000000000000000\n[gpucap]\ncontext_reserve = 0\nmemory_limit = 1GiB\nmemory_request = 0\nreclaim_grace = 1\n' \
    > "$(vol $e_uid gpucap-lib train)/gpucap.ini"
printf '; generation = 00000000000000000\n[gpucap]\ncontext_reserve = 0\nmemory_limit = 400MiB\nmemory_request = 400MiB\nreclaim_grace = 3\n' \
    > "$(vol $g_uid gpucap-lib serve)/gpucap.ini"
# A tenant's own "socket" in its ledger directory: a symbolic link to a file of the node.
echo keep > "$t/node-file"
ln -s "$t/node-file" "$(vol $e_uid gpucap-ledger train)/arbiter.sock"

python3 "$here/../agent/fake_apiserver.py" "$t/port" "$t/api.log" qos &
waitfor test -s "$t/port"
echo test-token-1 > "$t/token"
"$agent" --node node-a --root "$root" --kube-api "http://127.0.0.1:$(cat "$t/port")" --plain-http \
    --token-file "$t/token" --ca-file /dev/null --rounds 4 --watch-timeout 2 --arbiter --reclaim "$mode" \
    --reclaim-grace 0.5 --state-dir "$t/state" 2> "$t/agent.err" &
apid=$!
waitfor test -S "$(vol $e_uid gpucap-ledger train)/arbiter.sock" || bad "no socket in the container's ledger directory"
[ "$(cat "$t/node-file")" = keep ] || bad "the node's file was written through the tenant's link"
# container: a process as the container runs it (its settings file and ledger by paths of its own: the
# container sees its ledger directory at a short path, which a socket's name needs; here a link).
container() {
    local uid=$1 c=$2
    shift 2
    ln -sfn "$(vol "$uid" gpucap-ledger "$c")" "$t/l-$c"
    env GPUCAP_CONFIG="$(vol "$uid" gpucap-lib "$c")/gpucap.ini" GPUCAP_LEDGER="$t/l-$c/gpucap.ledger" \
        LD_PRELOAD="$TEST_PRELOAD" "$alloc" "$@"
}
container $e_uid train a100 a800 s300 > "$t/e.out" 2> "$t/e.err" &
epid=$!
waitfor grep -qs "used=$((900 * MiB)) " "$(vol $e_uid gpucap-lib train)/qos.state" ||
    bad "the best-effort container did not borrow: $(cat "$(vol $e_uid gpucap-lib train)/qos.state" "$t/e.err" 2> /dev/null)"
grep -qx "memory_grant = $((900 * MiB))" "$(vol $e_uid gpucap-lib train)/gpucap.ini" ||
    bad "grant: $(cat "$(vol $e_uid gpucap-lib train)/gpucap.ini")"
if [ "$mode" = evict ]; then
    # The kubelet's part: the evicted pod's processes end.
    (waitfor grep -q '/eviction"' "$t/api.log" && pkill -9 -P $epid) &
fi
container $g_uid serve a400 > "$t/g.out" 2> "$t/g.err"
[ "$(sed -n 's/^results=//p' "$t/g.out")" = 0 ] || bad "the guaranteed container's request: $(cat "$t/g.out" "$t/g.err")"
case $mode in
kill)
    wait $epid
    [ $? = 137 ] || bad "the borrower's process was not SIGKILLed"
    ;;
evict)
    wait $epid
    [ $? = 137 ] || bad "the evicted pod's process still ran"
    ;;
esac
wait $apid
rc=$?
[ $rc = 0 ] || bad "agent exit $rc"
grep -q "size=$((1024 * MiB)) " "$t/state/cards.state" || bad "cards.state: $(cat "$t/state/cards.state" 2> /dev/null)"
grep -q "request=$((400 * MiB)) limit=$((400 * MiB)) " "$(vol $g_uid gpucap-lib serve)/qos.state" ||
    bad "qos.state: $(cat "$(vol $g_uid gpucap-lib serve)/qos.state" 2> /dev/null)"
python3 - "$t/api.log" "$mode" <<'PY' || bad "API calls: $(grep POST "$t/api.log")"
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
posts = [r for r in log if r["method"] == "POST"]
events = [r["body"] for r in posts if r["path"].endswith("/events")]
rec = [e for e in events if e["reason"] == "GpuMemoryReclaimed"]
assert len(rec) == 1, events
e = rec[0]
assert e["type"] == "Warning" and e["involvedObject"]["name"] == "train-0", e
assert e["involvedObject"]["fieldPath"] == "spec.containers{train}", e
assert "container train:" in e["message"] and ("killed" in e["message"] or "evicted" in e["message"]), e["message"]
ev = [r for r in posts if r["path"].endswith("/eviction")]
if sys.argv[2] == "evict":
    assert len(ev) == 1 and ev[0]["path"] == "/api/v1/namespaces/team-a/pods/train-0/eviction", ev
    b = ev[0]["body"]
    assert b["apiVersion"] == "policy/v1" and b["kind"] == "Eviction" and b["metadata"]["name"] == "train-0", b
else:
    assert not ev, ev
PY
[ $fail = 0 ] || { echo "--- agent:"; cat "$t/agent.err"; }
exit $fail
