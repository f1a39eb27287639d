#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_hostile.sh MODE AGENT CLI_ALLOC: gpucap-agent against fake_apiserver.py playing a hostile or
# merely large cluster, on a directory laid out like the kubelet's.
#   finished  a budget lowered below what the ledger still records for a process that has exited
#             (the container finished): the process is gone, so the Event is Normal, no "it holds"
#   ceiling   records a tenant may have written (pods/status, a pod injected before records, a UPDATE
#             the webhook let through) never set a budget above the maximum fixed in the file at
#             creation: a raise is clamped to it (a Warning Event), a maximum above it is not
#             written, a pod without a maximum keeps its creation budget as one (a process under
#             the library is still denied past it), a record not of the webhook's exact form is
#             refused whole (file untouched), a lowering then a raise back within the ceiling work
#   inject    the same with the files `gpucap inject` writes (its ceiling line): with --max 1GiB a
#             record asking 16GiB gets 1GiB; without --max the budget it was given stays the most
#   pages     metadata only (Accept as=PartialObjectMetadataList / as=PartialObjectMetadata), pages of
#             `limit` with continue tokens, a 410 between pages answered by one whole list from the
#             watch cache; pods whose other annotations and labels hold NULs, 250 KiB values, numbers
#             of 400 digits and bytes that are not UTF-8 are all applied
#   bloated   60 pods of 1.5 MB (managedFields, a 250 KiB annotation) in one answer: the agent's peak
#             RSS stays under 32 MiB and the last pod's change in the watch is applied
#   files     a FIFO as a ledger (no hang), a FIFO, a symbolic link, a hard link to a host file and a
#             file of another owner as gpucap.ini, a linked container directory: all refused, the host
#             file untouched; the ordinary pod is applied
#   atonce    a server that ends every watch at once: one list only, watches from the same
#             resourceVersion with growing waits (a backoff with jitter), no tight loop
#   errors    watches that fail (HTTP 500, garbage, a cut stream; then an ERROR event, HTTP 429): no
#             relist, a backoff, watching again from the same resourceVersion; the good one applied
#   lists     lists that cannot be used (garbage, a 5 MiB token, nesting 5,000 deep; then one that is
#             not a list, a body cut short, a slow trickle past --request-timeout): a backoff, no crash,
#             the good list after them applied
#   tls       over TLS with a CA made here (--ca-file): 20 pods, 300 changes as fast as the server
#             sends them, all applied, on at most two kept-alive connections; Events answered in 0.5 s
#             each do not hold the changes back (they are posted from a queue)
#   ca_only   a server whose certificate comes from a CA found only in the system store
#             (/etc/ssl/certs, replaced in a private mount namespace): refused, with --ca-file naming
#             another CA, by the agent and by the request set-up the webhook's namespace reader shares
#             (the controls: accepted with that CA as --ca-file); skips without unshare
set -u
mode=$1 agent=$2 alloc=$3
here=$(cd "$(dirname "$0")" && pwd)
if [ "$mode" = ca_only ] && [ -z "${IN_NS:-}" ]; then
    command -v unshare > /dev/null && unshare -m true 2> /dev/null ||
        { echo "SKIP: no private mount namespace here (unshare -m)"; exit 77; }
    exec env IN_NS=1 unshare -m --propagation private bash "$0" "$@"
fi
. "$here/../common.sh"
root=$t/pods
echo test-token-1 > "$t/token"
uid() { printf '0a0a0a0a-1111-4222-8333-%012d' "$1"; }
vol() { echo "$root/$(uid "$1")/volumes/kubernetes.io~empty-dir/$2"; }
dir() { echo "$(vol "$1" "$2")/train"; }
ini() { echo "$(dir "$1" gpucap-lib)/gpucap.ini"; }
# mkpod N [INI TEXT]: pod N's container train with its settings file (as an older gpucap inject
# wrote it: no ceiling line) and its ledger directory.
mkpod() {
    mkdir -p "$(dir "$1" gpucap-lib)" "$(dir "$1" gpucap-ledger)"
    printf '%b' "${2:-[gpucap]\nlock = true\nmemory_limit = 64MiB\nmemory_limit_max = 1GiB\n}" > "$(ini "$1")"
}
# server SCENARIO [CERT KEY]: the fake API server, its port in $port.
server() {
    rm -f "$t/port"
    python3 "$here/fake_apiserver.py" "$t/port" "$t/api.log" "$@" 2> "$t/server.err" &
    waitfor test -s "$t/port" || { bad "the fake API server did not start: $(cat "$t/server.err")"; exit 1; }
    port=$(cat "$t/port")
}
# agent ROUNDS [ARGS...]: the agent against it (plain HTTP unless ARGS say otherwise), for at most 60 s.
agent() {
    local rounds=$1
    shift
    timeout 60 "$agent" --node node-a --root "$root" --token-file "$t/token" --rounds "$rounds" --watch-timeout 5 \
        --relist-spread 1 "$@" 2> "$t/agent.err"
    rc=$?
    [ $rc = 0 ] || bad "agent exit $rc (124: it hung): $(tail -20 "$t/agent.err")"
}
plain() { agent "$@" --kube-api "http://127.0.0.1:$port" --plain-http --ca-file /dev/null; }
figure() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$t/agent.err" | tail -1; }
has() { grep -qx -- "$2" "$(ini "$1")" || bad "pod $1: no line '$2' in: $(cat "$(ini "$1")")"; }
log_py() { python3 - "$t/api.log" "$@"; }

case $mode in
finished)
    # A container whose process exited holding 96 MiB (its share stays in the ledger: no process of
    # the container is left to reap it), lowered from 128 MiB to 64 MiB: the process is gone (its
    # liveness lock with it), so the container holds nothing and the Event is no warning.
    mkpod 1 '[gpucap]\nmemory_limit = 128MiB\nmemory_limit_max = 1GiB\n'
    env -u GPUCAP_MEMORY_LIMIT -u GPUCAP_CLI -u GPUCAP_LIB GPUCAP_CONFIG="$(ini 1)" \
        GPUCAP_LEDGER="$(dir 1 gpucap-ledger)/gpucap.ledger" LD_PRELOAD="$TEST_PRELOAD" "$alloc" a96 > "$t/proc.out" 2>&1
    grep -q "results=0$" "$t/proc.out" || bad "the container's process did not hold its 96 MiB: $(cat "$t/proc.out")"
    server atonce
    plain 1
    has 1 "memory_limit = 64MiB"
    log_py <<'PY' || bad "Events: $(grep POST "$t/api.log")"
import json, sys
ev = [json.loads(l)["body"] for l in open(sys.argv[1]) if '"POST"' in l]
assert len(ev) == 1 and ev[0]["type"] == "Normal" and ev[0]["reason"] == "GpuBudgetChanged", ev
assert ev[0]["message"] == "container train: GPU memory budget changed from 128MiB to 64MiB", ev[0]["message"]
PY
    ;;
ceiling)
    for i in 1 3 4 5 6 7 8 9 10 11 12; do mkpod $i; done
    mkpod 2 '[gpucap]\nlock = true\nmemory_limit = 64MiB\n'  # injected before records: no maximum
    for i in 5 6 7 8 9 10 11 12; do cp "$(ini $i)" "$t/before.$i"; done
    server ceiling
    plain 1
    has 1 "memory_limit = 1GiB"
    has 1 "memory_limit_max = 1GiB"
    has 2 "memory_limit = 64MiB"
    grep -q "16GiB" "$(ini 2)" && bad "pod 2: a record raised a pod without a maximum: $(cat "$(ini 2)")"
    has 3 "memory_limit = 90%"
    has 3 "memory_limit_max = 1GiB"
    # p4: 512MiB (maximum 512MiB), then 16MiB (maximum back to 1GiB), then 1GiB: within the ceiling.
    has 4 "memory_limit = 1GiB"
    has 4 "memory_limit_max = 1GiB"
    has 4 "; ceiling = 1GiB: the most gpucap-agent may set, fixed at creation"
    for i in 5 6 7 8 9 10 11 12; do
        cmp -s "$(ini $i)" "$t/before.$i" || bad "pod $i: a record not of the webhook's form was applied: $(cat "$(ini $i)")"
    done
    [ "$(grep -c "is not a budget record" "$t/agent.err")" -ge 8 ] || bad "refusals not said: $(cat "$t/agent.err")"
    grep -q "container train: the record asks for 16GiB, above the maximum 1GiB fixed when the pod was created" \
        "$t/agent.err" || bad "the clamp is not said: $(cat "$t/agent.err")"
    log_py <<'PY' || bad "Events: $(grep POST "$t/api.log")"
import json, sys
ev = [json.loads(l)["body"] for l in open(sys.argv[1]) if '"POST"' in l]
p1 = [e for e in ev if e["involvedObject"]["name"] == "p1"]
assert len(p1) == 1 and p1[0]["type"] == "Warning" and p1[0]["reason"] == "GpuBudgetAboveMaximum", p1
assert "changed from 64MiB to 1GiB" in p1[0]["message"] and "asked for 16GiB" in p1[0]["message"], p1
assert not [e for e in ev if e["involvedObject"]["name"] in ("p2",) + tuple("p%d" % i for i in range(5, 13))], ev
assert len([e for e in ev if e["involvedObject"]["name"] == "p4"]) == 3
PY
    # End to end: the pod without a maximum is still capped at its creation budget (64 MiB).
    out=$(env -u GPUCAP_MEMORY_LIMIT GPUCAP_CONFIG="$(ini 2)" GPUCAP_LEDGER=off LD_PRELOAD="$TEST_PRELOAD" \
        "$alloc" a100 2>&1)
    grep -q "results=1$" <<< "$out" || bad "a 100 MiB allocation under pod 2's file: $out"
    ;;
inject)
    for i in 1 2; do mkdir -p "$(vol $i gpucap-lib)" "$(vol $i gpucap-ledger)"; done
    "$GPUCAP_CLI" inject --to "$(vol 1 gpucap-lib)" --ledgers "$(vol 1 gpucap-ledger)" --max 1GiB train=64MiB \
        > /dev/null || bad "inject 1"
    "$GPUCAP_CLI" inject --to "$(vol 2 gpucap-lib)" --ledgers "$(vol 2 gpucap-ledger)" train=64MiB > /dev/null ||
        bad "inject 2"
    has 1 "; ceiling = 1GiB: the most gpucap-agent may set, fixed at creation"
    has 2 "; ceiling = 64MiB: the most gpucap-agent may set, fixed at creation"
    server ceiling
    plain 1
    has 1 "memory_limit = 1GiB"
    has 1 "memory_limit_max = 1GiB"
    has 2 "memory_limit = 64MiB"
    grep -q "16GiB" "$(ini 1)" "$(ini 2)" && bad "a record raised a budget past its ceiling"
    [ "$(grep -c '^; ceiling' "$(ini 1)")" = 1 ] || bad "the ceiling line twice: $(cat "$(ini 1)")"
    env -i "$GPUCAP_CLI" check "$(ini 1)" > "$t/check.out" 2>&1 || bad "the rewritten file: $(cat "$t/check.out")"
    ;;
pages)
    for i in 1 2 3 4 5 6; do mkpod $i; done
    server pages
    plain 2 --page-size 2
    for i in 1 2 3 4 5 6; do has $i "memory_limit = $((100 + i))MiB"; done
    [ "$(figure lists)" = 1 ] && [ "$(figure skipped)" = 0 ] || bad "figures: $(tail -1 "$t/agent.err")"
    log_py <<'PY' || bad "requests: $(cat "$t/api.log")"
import json, sys
gets = [json.loads(l) for l in open(sys.argv[1])]
gets = [g for g in gets if g["method"] == "GET"]
lists = [g for g in gets if "watch" not in g["query"]]
q = [g["query"] for g in lists]
assert len(lists) == 4, q
assert q[0]["limit"] == ["2"] and q[0]["resourceVersion"] == ["0"] and "continue" not in q[0], q[0]
assert q[1]["continue"] == ["c1"] and "resourceVersion" not in q[1], q[1]
assert q[2]["continue"] == ["c2"], q[2]
# The continue token expired: the whole list in one answer, from the watch cache.
assert "limit" not in q[3] and "continue" not in q[3] and q[3]["resourceVersion"] == ["0"], q[3]
for g in lists:
    assert g["accept"] == "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", g["accept"]
w = [g for g in gets if "watch" in g["query"]]
assert w and w[0]["query"]["resourceVersion"] == ["300"], w
assert w[0]["accept"] == "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", w[0]["accept"]
PY
    ;;
bloated)
    mkpod 1
    mkpod 60
    FAKE_PODS=60 server bloated
    plain 1 --page-size 500
    has 1 "memory_limit = 101MiB"
    has 60 "memory_limit = 77MiB"
    rss=$(figure peak_rss_kib)
    echo "peak RSS with 60 pods of $(sed -n 's/.*pods of \([0-9]*\) bytes.*/\1/p' "$t/server.err") bytes: $rss KiB"
    [ -n "$rss" ] && [ "$rss" -lt 32768 ] || bad "peak RSS $rss KiB, not under 32 MiB"
    ;;
files)
    for i in 1 2 3 4 5 6 7; do mkpod $i; done
    # p1: gpucap.ini is a FIFO. p2: the ledger is a FIFO (read for the Event: must not hang).
    rm "$(ini 1)" && mkfifo "$(ini 1)"
    mkfifo "$(dir 2 gpucap-ledger)/gpucap.ledger"
    # p3: a hard link to a host file. p4: a symbolic link to it. p5: a file of another owner.
    printf '[gpucap]\nmemory_limit = 64MiB\nmemory_limit_max = 1GiB\n' > "$t/host.ini"
    cp "$t/host.ini" "$t/host.orig"
    rm "$(ini 3)" && ln "$t/host.ini" "$(ini 3)"
    rm "$(ini 4)" && ln -s "$t/host.ini" "$(ini 4)"
    chown 12345 "$(ini 5)" 2> /dev/null || { echo "SKIP: cannot chown (not root)"; exit 77; }
    # p6: the container's directory is a link to another pod's.
    rm -r "$(dir 6 gpucap-lib)" && ln -s "$(dir 7 gpucap-lib)" "$(dir 6 gpucap-lib)"
    cp "$(ini 5)" "$t/p5.orig"
    server files
    plain 1
    has 7 "memory_limit = 32MiB"
    has 2 "memory_limit = 32MiB"
    cmp -s "$t/host.ini" "$t/host.orig" || bad "the host file was rewritten through a link: $(cat "$t/host.ini")"
    cmp -s "$(ini 5)" "$t/p5.orig" || bad "a file of another owner was rewritten"
    [ -p "$(ini 1)" ] || bad "the FIFO is gone"
    for why in "it is a FIFO" "it has 2 links" "it is a symbolic link" "owned by uid 12345"; do
        grep -q "$why" "$t/agent.err" || bad "not said: '$why': $(cat "$t/agent.err")"
    done
    [ "$(figure changes)" = 2 ] || bad "changes: $(tail -1 "$t/agent.err")"
    ;;
atonce)
    mkpod 1
    server atonce
    plain 4
    log_py <<'PY' || bad "requests: $(cat "$t/api.log")"
import json, sys
gets = [json.loads(l) for l in open(sys.argv[1])]
gets = [g for g in gets if g["method"] == "GET"]
lists = [g for g in gets if "watch" not in g["query"]]
w = [g for g in gets if "watch" in g["query"]]
assert len(lists) == 1 and len(w) == 4, (len(lists), len(w))
assert all(g["query"]["resourceVersion"] == ["700"] for g in w)
gaps = [b["t"] - a["t"] for a, b in zip(w, w[1:])]
# Waits of [0.8, 1.6), [1.6, 3.2), [3.2, 6.4): growing, never a tight loop.
assert 0.8 <= gaps[0] < 1.7 and 1.6 <= gaps[1] < 3.3 and 3.2 <= gaps[2] < 6.5, gaps
PY
    ;;
errors)
    mkpod 1
    FAKE_ERRORS=${FAKE_ERRORS:-500,garbage,cut} server errors
    plain 5
    has 1 "memory_limit = 48MiB"
    log_py <<'PY' || bad "requests: $(cat "$t/api.log")"
import json, sys
gets = [json.loads(l) for l in open(sys.argv[1])]
gets = [g for g in gets if g["method"] == "GET"]
lists = [g for g in gets if "watch" not in g["query"]]
w = [g for g in gets if "watch" in g["query"]]
assert len(lists) == 1, len(lists)
assert [g["query"]["resourceVersion"][0] for g in w[:4]] == ["800"] * 4, [g["query"] for g in w]
gaps = [b["t"] - a["t"] for a, b in zip(w, w[1:4])]
assert gaps[0] >= 0.8 and gaps[1] >= 1.6 and gaps[2] >= 3.2, gaps
PY
    ;;
lists)
    mkpod 1
    FAKE_LISTS=${FAKE_LISTS:-garbage,token,deep} server hostile
    plain 4 --request-timeout 2
    has 1 "memory_limit = 40MiB"
    [ "$(figure lists)" = 1 ] || bad "figures: $(tail -1 "$t/agent.err")"
    n=$(grep -c '"watch"' "$t/api.log")
    [ "$(grep -c . "$t/api.log")" -ge 4 ] || bad "requests: $(cat "$t/api.log")"
    ;;
tls | ca_only)
    # Two CAs: "cluster" (given as --ca-file) and "system" (found only in the system store).
    for ca in cluster system; do
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$ca CA" \
            -keyout "$t/$ca-ca.key" -out "$t/$ca-ca.crt" 2> /dev/null || bad "openssl: CA"
    done
    signer=cluster
    [ "$mode" = ca_only ] && signer=system
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 -keyout "$t/tls.key" \
        -out "$t/tls.csr" 2> /dev/null &&
        printf 'subjectAltName=IP:127.0.0.1\n' > "$t/ext" &&
        openssl x509 -req -in "$t/tls.csr" -CA "$t/$signer-ca.crt" -CAkey "$t/$signer-ca.key" -CAcreateserial \
            -days 1 -extfile "$t/ext" -out "$t/tls.crt" 2> /dev/null || bad "openssl: server certificate"
    if [ "$mode" = tls ]; then
        for i in $(seq 1 20); do mkpod $i; done
        FAKE_PODS=20 FAKE_EVENTS=300 FAKE_RATE=0 FAKE_POST_DELAY=0.5 server rate "$t/tls.crt" "$t/tls.key"
        timeout 60 "$agent" --node node-a --root "$root" --token-file "$t/token" --kube-api "https://127.0.0.1:$port" \
            --ca-file "$t/cluster-ca.crt" --watch-timeout 5 2> "$t/agent.err" &
        apid=$!
        # The last change of each pod: 65 + k MiB for the last k of that pod (k = 280..299).
        done_all() {
            for i in $(seq 1 20); do grep -qx "memory_limit = $((65 + 279 + i))MiB" "$(ini "$i")" || return 1; done
        }
        waitfor done_all || bad "not every change applied within 10 s (Events held them back?): $(cat "$(ini 20)")"
        kill "$apid"
        wait "$apid"
        posts=$(grep -c '"POST"' "$t/api.log")
        [ "$posts" -lt 100 ] || bad "$posts Events posted in the time: were they posted off the watch?"
        log_py <<'PY' || bad "connections: $(cut -c1-200 "$t/api.log" | head)"
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
conns = {r["conn"] for r in log}
assert len(conns) <= 2, sorted(conns)
PY
    else
        # The system store holds only the "system" CA, which signed the server's certificate.
        mkdir "$t/certs" && cp "$t/system-ca.crt" "$t/certs/" && openssl rehash "$t/certs" 2> /dev/null
        mount --bind "$t/certs" /etc/ssl/certs || { echo "SKIP: bind mount refused"; exit 77; }
        mkpod 1
        server basic "$t/tls.crt" "$t/tls.key"
        agent 1 --kube-api "https://127.0.0.1:$port" --ca-file "$t/cluster-ca.crt"
        [ "$(figure lists)" = 0 ] || bad "a certificate of a CA of the system store only was accepted"
        grep -qi "certificate\|issuer\|SSL\|TLS" "$t/agent.err" || bad "no TLS error said: $(cat "$t/agent.err")"
        # The webhook's namespace reader shares the request set-up (kubeapi.c): the same rule.
        "$KUBEAPI_GET" "https://127.0.0.1:$port/api/v1/namespaces/team-a" "$t/token" "$t/cluster-ca.crt" \
            > "$t/get.out" 2>&1 && bad "kubeapi.c accepted a CA of the system store only: $(cat "$t/get.out")"
        # The controls: the same server with that CA as --ca-file.
        agent 1 --kube-api "https://127.0.0.1:$port" --ca-file "$t/system-ca.crt"
        [ "$(figure lists)" = 1 ] || bad "control: the server's own CA was refused: $(tail -3 "$t/agent.err")"
        "$KUBEAPI_GET" "https://127.0.0.1:$port/api/v1/namespaces/team-a" "$t/token" "$t/system-ca.crt" \
            > "$t/get.out" 2>&1 || bad "control: kubeapi.c refused the server's own CA: $(cat "$t/get.out")"
        umount /etc/ssl/certs
    fi
    ;;
*)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
exit $fail
