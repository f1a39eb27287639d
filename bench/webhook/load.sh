#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# load.sh: load benchmark of gpucap-webhook over loopback TLS (a benchmark, not a timed test).
#
# usage: bench/webhook/load.sh PATH/TO/gpucap-webhook [SECONDS] [CONNECTIONS]
# Starts the webhook on 127.0.0.1 with a throwaway certificate and drives POST /mutate with wrk
# (Debian package wrk) and bench/webhook/post.lua over CONNECTIONS (16) keep-alive connections for
# SECONDS (10), then once more with a new TLS connection per request (Connection: close). Prints
# requests per second and p50/p99 latency of both runs. Exit 1 when a run did fewer than 2000
# requests or any request failed; 77 without wrk, openssl or curl.
set -u
WEBHOOK=${1:?usage: load.sh PATH/TO/gpucap-webhook [SECONDS] [CONNECTIONS]}
DURATION=${2:-10}
CONNS=${3:-16}
HERE=$(cd "$(dirname "$0")" && pwd)
BODY=${GPUCAP_BENCH_BODY:-$HERE/../../tests/webhook/fixtures/init-containers.json}
for tool in wrk openssl curl; do
    command -v $tool >/dev/null || { echo "load.sh: $tool not found (apt-get install $tool)"; exit 77; }
done

. "$HERE/../../tests/common.sh"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$t/tls.key" -out "$t/tls.crt" 2>/dev/null
THREADS=${GPUCAP_BENCH_THREADS:-$(nproc)}
"$WEBHOOK" --listen 127.0.0.1:0 --cert "$t/tls.crt" --key "$t/tls.key" --threads "$THREADS" \
    --image gpucap:bench --default-memory 25% 2>"$t/log" &
PORT=$(listen_port "$t/log" $!) || { cat "$t/log"; echo "load.sh: the webhook did not start"; exit 1; }
curl -sf --cacert "$t/tls.crt" "https://127.0.0.1:$PORT/healthz" >/dev/null || { echo "load.sh: /healthz failed"; exit 1; }

echo "gpucap-webhook $THREADS threads, body $(wc -c <"$BODY") bytes ($(basename "$BODY")), $CONNS connections, ${DURATION}s, $(nproc) CPUs"
status=0
for mode in keep-alive new-connection; do
    close=0
    [ $mode = new-connection ] && close=1
    out=$(GPUCAP_BENCH_BODY=$BODY GPUCAP_BENCH_CLOSE=$close wrk -t "$(( CONNS < $(nproc) ? CONNS : $(nproc) ))" \
        -c "$CONNS" -d "${DURATION}s" --timeout 5s -s "$HERE/post.lua" "https://127.0.0.1:$PORT/mutate")
    line=$(grep '^RESULT' <<<"$out")
    echo "$mode: ${line#RESULT }"
    eval "${line#RESULT }"
    if [ "$requests" -lt 2000 ] || [ "$errors" -ne 0 ] || [ "$non2xx" -ne 0 ]; then
        echo "load.sh: $mode run failed: $requests requests, $errors errors, $non2xx non-2xx"
        status=1
    fi
done
decisions=$(grep -c 'allowed: patched' "$t/log")
echo "decisions logged: $decisions"
exit $status
