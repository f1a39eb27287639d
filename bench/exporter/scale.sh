#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# scale.sh: scrape time of gpucap-exporter per 1,000 ledgers, on nodes with many gpucap containers
# (a benchmark, not a timed test).
#
# usage: bench/exporter/scale.sh [BUILD] [COUNTS...]
# For each COUNT (default 1000 10000), writes that many ledgers (tests/cli/ledger_forge make: two
# containers a pod, each with its identity, a card entry and one process holding memory) under a
# directory laid out like /var/lib/kubelet/pods, starts the exporter on loopback (--cards none) and
# scrapes /metrics 10 times. Prints the exporter's own gpucap_exporter_scrape_duration_seconds
# (median, worst) and that per 1,000 ledgers, the bytes it read per ledger (/proc/PID/io rchar over
# one scrape) and the size of one exposition. Exit 1 when a scrape fails or shows fewer ledgers than
# were written; 77 without curl.
set -u
build=${1:-build}
shift || true
counts=${*:-1000 10000}
command -v curl > /dev/null || { echo "scale.sh: curl not found"; exit 77; }
exporter=$build/tools/exporter/gpucap-exporter forge=$build/tests/ledger_forge
. "$(dirname "$0")/../../tests/common.sh"
status=0
for n in $counts; do
    rm -rf "$t/pods"
    start=$(date +%s.%N)
    "$forge" make "$t/pods" "$n" || { echo "could not write the ledgers"; exit 1; }
    printf '%d ledgers written in %.1f s\n' "$n" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')"
    "$exporter" --listen 127.0.0.1:0 --root "$t/pods" --cards none 2> "$t/log" &
    pid=$!
    port=$(listen_port "$t/log" $pid) || { echo "exporter did not start: $(cat "$t/log")"; exit 1; }
    : > "$t/self"
    curl -sf -o "$t/m" "http://127.0.0.1:$port/metrics" || { echo "scrape failed"; exit 1; } # warm the cache
    before=$(sed -n 's/^rchar: //p' /proc/$pid/io)
    curl -sf -o "$t/m" "http://127.0.0.1:$port/metrics"
    after=$(sed -n 's/^rchar: //p' /proc/$pid/io)
    for ((i = 0; i < 10; i++)); do
        curl -sf -o "$t/m" "http://127.0.0.1:$port/metrics" || { echo "scrape failed"; status=1; break; }
        sed -n 's/^gpucap_exporter_scrape_duration_seconds //p' "$t/m" >> "$t/self"
    done
    kill $pid; wait $pid 2> /dev/null
    got=$(sed -n 's/^gpucap_exporter_ledgers //p' "$t/m")
    [ "$got" = "$n" ] || { echo "a scrape showed $got ledgers of $n"; status=1; }
    sort -g "$t/self" | awk -v n="$n" -v read=$((after - before)) -v size="$(wc -c < "$t/m")" '{v[NR]=$1} END {
        m = v[int((NR+1)/2)] * 1000
        printf "  %d ledgers: scrape median %.1f ms, worst %.1f ms: %.1f ms per 1,000 ledgers; %.1f KiB read per ledger; exposition %.1f MiB\n",
            n, m, v[NR] * 1000, m * 1000 / n, read / n / 1024, size / 1048576 }'
done
exit $status
