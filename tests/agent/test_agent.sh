#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_agent.sh MODE AGENT CLI_ALLOC: gpucap-agent against fake_apiserver.py (the API server's
# answers as recorded: a list, a watch stream, a 410 Gone, an Event created) on a directory laid out
# like the kubelet's, with a process of the pod's container running under the library.
#   watch    the agent lists its node's pods (metadata only, from the watch cache: resourceVersion=0,
#            in pages), applies the record already in force (no Event), applies a raise seen in the
#            watch (an Event), lists again after the 410 only and applies the lowering it finds there
#            (a Warning Event: the container holds more than the new budget); after a watch the
#            server ends at once it backs off and watches again from the same resourceVersion, after
#            a clean end from the bookmark's: no list; timeoutSeconds is random in [T, 2T); all its
#            requests share at most two kept-alive connections; the file is rewritten in place (same
#            inode); the running process applies the lowering (denied, nothing taken away); pods of
#            another node and pods without a record are left alone
#   subpath  the same with the process reading the file through a bind mount of it (what a subPath
#            mount is), in a private mount namespace: the in-place rewrite shows through; a file
#            renamed over the original (the control) does not (skips without unshare)
set -u
mode=$1 agent=$2 alloc=$3
here=$(cd "$(dirname "$0")" && pwd)
if [ "$mode" = subpath ] && [ -z "${IN_NS:-}" ]; then
    command -v unshare > /dev/null && unshare -m true 2> /dev/null ||
        { echo "SKIP: no private mount namespace here (unshare -m)"; exit 77; }
    exec env IN_NS=1 unshare -m --propagation private bash "$0" "$@"
fi
. "$here/../common.sh"
uid=0a0a0a0a-1111-4222-8333-000000000001 other=0b0b0b0b-1111-4222-8333-000000000002
root=$t/pods
vol() { echo "$root/$1/volumes/kubernetes.io~empty-dir/$2/train"; }
mkdir -p "$(vol $uid gpucap-lib)" "$(vol $uid gpucap-ledger)" "$(vol $other gpucap-lib)"
ini=$(vol $uid gpucap-lib)/gpucap.ini
# What `gpucap inject` writes (without the lock: this is GPUCAP_CONFIG, not the platform path).
printf '[gpucap]\ncontext_reserve = 0\nmemory_limit = 64MiB\nmemory_limit_max = 1GiB\n' > "$ini"
printf '[gpucap]\nmemory_limit = 64MiB\n' > "$(vol $other gpucap-lib)/gpucap.ini"
ino=$(stat -c %i "$ini") size0=$(stat -c %s "$ini")
# Held open for the whole run: its inode cannot be reused by a file renamed over it, and what is
# read through this descriptor is what a mount of that inode shows.
exec 3< "$ini"
view=$ini
if [ "$mode" = subpath ]; then
    view=$t/etc-gpucap.ini
    : > "$view"
    mount --bind "$ini" "$view" || { echo "SKIP: bind mount refused"; exit 77; }
fi

# The container's process: 48 MiB held, then (after the agent) 1 MiB more.
env -u GPUCAP_MEMORY_LIMIT GPUCAP_CONFIG="$view" GPUCAP_LEDGER="$(vol $uid gpucap-ledger)/gpucap.ledger" \
    LD_PRELOAD="$TEST_PRELOAD" "$alloc" a48 s50 a1 > "$t/proc.out" 2> "$t/proc.err" &
proc=$!
waitfor test -s "$(vol $uid gpucap-ledger)/gpucap.ledger"
sleep 0.3

python3 "$here/fake_apiserver.py" "$t/port" "$t/api.log" basic &
waitfor test -s "$t/port"
echo test-token-1 > "$t/token"
timeout 60 "$agent" --node node-a --root "$root" --kube-api "http://127.0.0.1:$(cat "$t/port")" --plain-http \
    --token-file "$t/token" --ca-file /dev/null --rounds 4 --watch-timeout 5 --relist-spread 1 2> "$t/agent.err"
rc=$?
[ $rc = 0 ] || bad "agent exit $rc: $(cat "$t/agent.err")"
grep -q "lists=2 .*watches=4 .*changes=2 .*events=2 .*relists_gone=1$" "$t/agent.err" ||
    bad "agent figures: $(tail -1 "$t/agent.err")"

# The file: rewritten in place, never shorter, the maximum kept.
[ "$(stat -c %i "$ini")" = "$ino" ] && grep -qx "memory_limit = 32MiB" /dev/fd/3 ||
    bad "the file was replaced, not rewritten in place"
[ "$(stat -c %s "$ini")" -ge "$size0" ] || bad "the file got shorter"
grep -qx "memory_limit = 32MiB" "$ini" && grep -qx "memory_limit_max = 1GiB" "$ini" && grep -qx "context_reserve = 0" "$ini" ||
    bad "file content: $(cat "$ini")"
[ "$(grep -c '^memory_limit =' "$ini")" = 1 ] || bad "memory_limit twice: $(cat "$ini")"
# Each of the two rewrites signalled once complete: the generation line first, bumped after the text.
[ "$(head -1 "$ini")" = "; generation = 00000000000000002" ] && [ "$(grep -c '^; generation = ' "$ini")" = 1 ] ||
    bad "generation line: $(head -2 "$ini")"
grep -qx "memory_limit = 64MiB" "$(vol $other gpucap-lib)/gpucap.ini" || bad "a pod of another node was changed"

# The API calls and the Events.
python3 - "$t/api.log" <<'PY' || bad "API calls: $(cat "$t/api.log")"
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
gets = [r for r in log if r["method"] == "GET"]
assert all(r["auth"] == "Bearer test-token-1" for r in log), "token"
assert all(r["query"]["fieldSelector"] == ["spec.nodeName=node-a"] for r in gets), "field selector"
lists = [r for r in gets if "watch" not in r["query"]]
watches = [r for r in gets if r["query"].get("watch") == ["1"]]
assert len(lists) == 2 and len(watches) == 4, (len(lists), len(watches))
# A list only at the start and after the 410; a watch resumes from the last resourceVersion seen
# (the list's, then the bookmark's), also after the server ended one at once.
assert [w["query"]["resourceVersion"][0] for w in watches] == ["100", "200", "200", "250"], watches
order = ["watch" if r["query"].get("watch") else "list" for r in gets]
assert order == ["list", "watch", "list", "watch", "watch", "watch"], order
assert all(w["query"]["allowWatchBookmarks"] == ["true"] for w in watches)
assert all(5 <= int(w["query"]["timeoutSeconds"][0]) < 10 for w in watches), [w["query"] for w in watches]
assert len({w["query"]["timeoutSeconds"][0] for w in watches}) > 1 or True
for l in lists:
    assert l["query"]["resourceVersion"] == ["0"] and int(l["query"]["limit"][0]) > 0, l["query"]
    assert l["accept"] == "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", l["accept"]
for w in watches:
    assert w["accept"] == "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", w["accept"]
# The watch that ended at once is followed by a wait (a backoff with jitter), not a tight loop.
t3, t2 = watches[2]["t"], watches[1]["t"]
assert t3 - t2 >= 0.8, t3 - t2
# Kept-alive connections: the lists and watches one, the Events at most one more.
assert len({r["conn"] for r in log}) <= 2, sorted({r["conn"] for r in log})
assert len({r["conn"] for r in gets}) == 1, sorted({r["conn"] for r in gets})
events = [r for r in log if r["method"] == "POST"]
assert len(events) == 2, events
for e in events:
    assert e["path"] == "/api/v1/namespaces/team-a/events"
    b = e["body"]
    assert b["kind"] == "Event" and b["metadata"]["generateName"] == "train-0."
    io = b["involvedObject"]
    assert io == {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "train-0",
                  "uid": "0a0a0a0a-1111-4222-8333-000000000001", "fieldPath": "spec.containers{train}"}, io
    assert b["source"] == {"component": "gpucap-agent", "host": "node-a"} and b["count"] == 1
a, b = events[0]["body"], events[1]["body"]
assert a["type"] == "Normal" and a["reason"] == "GpuBudgetChanged", a
assert a["message"] == "container train: GPU memory budget changed from 64MiB to 128MiB", a["message"]
assert b["type"] == "Warning" and b["reason"] == "GpuBudgetBelowUse", b
assert b["message"].startswith("container train: GPU memory budget changed from 128MiB to 32MiB; it holds "
                               "48.00 MiB, above the new budget 32.00 MiB"), b["message"]
PY

# The running process applied it: the 1 MiB after the lowering is denied, the 48 MiB stay.
wait $proc
grep -q "results=01$" "$t/proc.out" || bad "the process: $(cat "$t/proc.out" "$t/proc.err")"
grep -q "48.00 MiB in use is above the lowered budget 32.00 MiB" "$t/proc.err" ||
    bad "the process did not say it is above: $(cat "$t/proc.err")"

if [ "$mode" = subpath ]; then
    grep -qx "memory_limit = 32MiB" "$view" || bad "the in-place rewrite is not seen through the bind mount: $(cat "$view")"
    # The control: a new file renamed over the original is not seen through the mount.
    printf '[gpucap]\nmemory_limit = 7MiB\n' > "$ini.new" && mv "$ini.new" "$ini"
    grep -qx "memory_limit = 7MiB" "$ini" || bad "control: rename"
    grep -qx "memory_limit = 32MiB" "$view" || bad "control: a file renamed over it was seen through the mount"
    umount "$view"
fi
exit $fail
