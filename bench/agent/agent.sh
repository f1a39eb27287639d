#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent.sh: benchmarks of gpucap-agent against tests/agent/fake_apiserver.py on 127.0.0.1 (a
# benchmark, not a timed test: it prints the figures).
#
# usage: bench/agent/agent.sh PATH/TO/gpucap-agent [AGENTS]
#   tls       changes applied per second over TLS (a CA made here), 50 pods, 5,000 changes sent as
#             fast as the server can; then the latency from the event sent to the file rewritten at
#             100 changes/s for 10 s (p50, p99, max), with the Events posted
#   lists     LISTs and watches per hour of one agent under a server that ends every watch after
#             0.5-2 s (bookmarks in them), measured over 30 s
#   restart   AGENTS agents (20) watching; the API server "restarts" (ends every watch, answers 410 to
#             the old resourceVersion): when each agent lists again, and the spread of those lists
#   rss       the agent's peak RSS with 500 pods of about 1.5 MB on its node in one answer
# Prints one line per figure. Exit 1 when a run failed (not applied, no list...), 77 without openssl.
set -u
AGENT=${1:?usage: agent.sh PATH/TO/gpucap-agent [AGENTS]}
N=${2:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
FAKE=$HERE/../../tests/agent/fake_apiserver.py
command -v openssl > /dev/null || { echo "agent.sh: openssl not found"; exit 77; }
. "$HERE/../../tests/common.sh"
root=$t/pods
status=0
echo test-token-1 > "$t/token"
mkpods() { # mkpods N
    for i in $(seq 1 "$1"); do
        d=$root/$(printf '0a0a0a0a-1111-4222-8333-%012d' "$i")/volumes/kubernetes.io~empty-dir
        mkdir -p "$d/gpucap-lib/train" "$d/gpucap-ledger/train"
        printf '[gpucap]\nlock = true\nmemory_limit = 64MiB\nmemory_limit_max = 64GiB\n' > "$d/gpucap-lib/train/gpucap.ini"
    done
}
server() { # server LOG SCENARIO [CERT KEY]: its port in $port
    rm -f "$t/port"
    python3 "$FAKE" "$t/port" "$@" 2>> "$t/server.err" &
    spid=$!
    waitfor test -s "$t/port" || { echo "agent.sh: the fake API server did not start"; cat "$t/server.err"; exit 1; }
    port=$(cat "$t/port")
}
echo "gpucap-agent benchmarks, $(nproc) CPUs"

# ---- tls: changes/s and latency ----
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=bench CA" \
    -keyout "$t/ca.key" -out "$t/ca.crt" 2> /dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 -keyout "$t/tls.key" \
    -out "$t/tls.csr" 2> /dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$t/ext"
openssl x509 -req -in "$t/tls.csr" -CA "$t/ca.crt" -CAkey "$t/ca.key" -CAcreateserial -days 1 -extfile "$t/ext" \
    -out "$t/tls.crt" 2> /dev/null
mkpods 50
for run in "throughput 5000 0" "latency 1000 100"; do
    set -- $run
    rm -f "$t/rate.log" "$t/rate.log.sent"
    FAKE_PODS=50 FAKE_EVENTS=$2 FAKE_RATE=$3 server "$t/rate.log" rate "$t/tls.crt" "$t/tls.key"
    python3 "$HERE/measure.py" "$root" 50 "$t/rate.log.sent" 60 > "$t/measure.out" &
    mpid=$!
    sleep 0.5 # its watches set up
    "$AGENT" --node node-a --root "$root" --token-file "$t/token" --kube-api "https://127.0.0.1:$port" \
        --ca-file "$t/ca.crt" 2> "$t/agent.err" &
    apid=$!
    wait "$mpid" || status=1
    out=$(cat "$t/measure.out")
    sleep 1
    kill "$apid" "$spid"
    wait "$apid" "$spid" 2> /dev/null
    conns=$(python3 -c 'import json,sys; print(len({json.loads(l)["conn"] for l in open(sys.argv[1])}))' "$t/rate.log")
    posts=$(grep -c '"POST"' "$t/rate.log")
    echo "tls $1 ($3/s, 0 = as fast as sent): $out events_posted=$posts connections=$conns"
    # the next run starts from 64MiB again
    for f in "$root"/*/volumes/kubernetes.io~empty-dir/gpucap-lib/train/gpucap.ini; do
        printf '[gpucap]\nlock = true\nmemory_limit = 64MiB\nmemory_limit_max = 64GiB\n' > "$f"
    done
done

# ---- lists: LISTs per hour under a server that ends every watch ----
server "$t/churn.log" churn
timeout 30 "$AGENT" --node node-a --root "$root" --token-file "$t/token" --kube-api "http://127.0.0.1:$port" \
    --plain-http --ca-file /dev/null 2> "$t/agent.err"
kill "$spid"
wait "$spid" 2> /dev/null
count() { # count PREDICATE: GET requests of churn.log for which the Python expression holds (r: the request)
    python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) for r in [json.loads(l)]
                                         if r["method"] == "GET" and eval(sys.argv[2])))' "$t/churn.log" "$1"
}
lists=$(count '"watch" not in r["query"]')
watches=$(count '"watch" in r["query"]')
echo "lists: a server ending every watch after 0.5-2 s, 30 s: LISTs=$lists (the first included) watches=$watches;" \
    "steady state: $(( (lists - 1) * 120 )) LISTs/hour, $(( watches * 120 )) watches/hour"
[ "$lists" -ge 1 ] || status=1

# ---- restart: relist spread of N agents ----
rm -f "$t/restart.log.restart"
server "$t/restart.log" restart
pids=()
for i in $(seq 0 $((N - 1))); do
    "$AGENT" --node "node-$i" --root "$root" --token-file "$t/token" --kube-api "http://127.0.0.1:$port" \
        --plain-http --ca-file /dev/null 2> "$t/agent-$i.err" &
    pids+=($!)
done
sleep 3
touch "$t/restart.log.restart"
t0=$(python3 -c 'import time; print(time.monotonic())')
sleep 75
kill "${pids[@]}" "$spid"
wait "${pids[@]}" "$spid" 2> /dev/null
python3 - "$t/restart.log" "$t0" "$N" <<'PY' || status=1
import json, sys
t0, n = float(sys.argv[2]), int(sys.argv[3])
first = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "watch" in r["query"] or r["t"] < t0:
        continue
    node = r["query"]["fieldSelector"][0]
    first.setdefault(node, r["t"] - t0)
ts = sorted(first.values())
if len(ts) < n:
    print("restart: only %d of %d agents listed again within 75 s" % (len(ts), n))
    sys.exit(1)
print("restart: %d agents relisted %.1f s to %.1f s after the restart: spread %.1f s (median %.1f s)" %
      (n, ts[0], ts[-1], ts[-1] - ts[0], ts[len(ts) // 2]))
PY

# ---- rss: 500 bloated pods ----
mkpods 1
FAKE_PODS=500 server "$t/bloat.log" bloated
start=$(date +%s.%N)
"$AGENT" --node node-a --root "$root" --token-file "$t/token" --kube-api "http://127.0.0.1:$port" --plain-http \
    --ca-file /dev/null --rounds 1 2> "$t/agent.err" || status=1
end=$(date +%s.%N)
kill "$spid"
wait "$spid" 2> /dev/null
rss=$(sed -n 's/.*peak_rss_kib=\([0-9]*\).*/\1/p' "$t/agent.err")
size=$(sed -n 's/.*pods of \([0-9]*\) bytes.*/\1/p' "$t/server.err" | tail -1)
echo "rss: 500 pods of $size bytes ($(( 500 * size / 1048576 )) MiB listed): peak RSS $rss KiB" \
    "($(( rss / 1024 )) MiB), list read in $(python3 -c "print('%.1f' % ($end - $start))") s"
[ -n "$rss" ] && [ "$rss" -le 32768 ] || status=1
exit $status
