#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# scrape.sh: how long one scrape of gpucap-exporter takes on a node with many gpucap containers
# (a benchmark, not a timed test).
#
# usage: bench/exporter/scrape.sh [BUILD] [CONTAINERS] [SCRAPES]
# Writes CONTAINERS (200) ledgers with real processes under the library on the fake driver (two
# containers per pod, each with its identity, one allocation, some with a denial) into a directory
# laid out like /var/lib/kubelet/pods, starts the exporter on loopback and scrapes /metrics SCRAPES
# (50) times with curl. Prints the median and worst HTTP time, the exporter's own
# gpucap_exporter_scrape_duration_seconds, and the size of one exposition. Exit 1 when a scrape
# fails or shows fewer ledgers than were written; 77 without curl.
set -u
build=${1:-build}
n=${2:-200}
scrapes=${3:-50}
command -v curl > /dev/null || { echo "scrape.sh: curl not found"; exit 77; }
exporter=$build/tools/exporter/gpucap-exporter alloc=$build/tests/cli_alloc lib=$build/lib/libgpucap.so
. "$(dirname "$0")/../../tests/common.sh"
export LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=80GiB GPUCAP_CONFIG=/dev/null GPUCAP_CONTEXT_RESERVE=0

start=$(date +%s.%N)
for ((i = 0; i < n; i++)); do
    pod=$((i / 2))
    uid=$(printf '%08x-0000-4000-8000-%012x' $pod $pod)
    ctr=c$((i % 2))
    dir=$t/pods/$uid/volumes/kubernetes.io~empty-dir/gpucap-ledger/$ctr
    mkdir -p "$dir"
    GPUCAP_LEDGER=$dir/gpucap.ledger GPUCAP_MEMORY_LIMIT=$((256 + i))MiB GPUCAP_POD_NAMESPACE=ns-$((pod % 10)) \
        GPUCAP_POD_NAME=pod-$pod GPUCAP_POD_UID=$uid GPUCAP_CONTAINER_NAME=$ctr LD_PRELOAD=$lib \
        "$alloc" a$((i % 300)) > /dev/null 2>&1 &
    (( i % 16 == 15 )) && wait
done
wait
printf 'wrote %d ledgers in %.1f s (%s bytes each)\n' "$n" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" \
    "$(stat -c %s "$dir/gpucap.ledger")"

"$exporter" --listen 127.0.0.1:0 --root "$t/pods" 2> "$t/log" &
port=$(listen_port "$t/log" $!) || { echo "exporter did not start: $(cat "$t/log")"; exit 1; }
: > "$t/http" && : > "$t/self"
for ((i = 0; i < scrapes; i++)); do
    curl -sf -o "$t/m" -w '%{time_total}\n' "http://127.0.0.1:$port/metrics" >> "$t/http" || { echo "scrape failed"; exit 1; }
    sed -n 's/^gpucap_exporter_scrape_duration_seconds //p' "$t/m" >> "$t/self"
done
got=$(sed -n 's/^gpucap_exporter_ledgers //p' "$t/m")
[ "$got" = "$n" ] || { echo "a scrape showed $got ledgers of $n"; exit 1; }
stats() { sort -g "$1" | awk '{v[NR]=$1} END {printf "median %.1f ms, worst %.1f ms", v[int((NR+1)/2)]*1000, v[NR]*1000}'; }
echo "$n containers, $scrapes scrapes over HTTP: $(stats "$t/http")"
echo "  of which reading the ledgers (gpucap_exporter_scrape_duration_seconds): $(stats "$t/self")"
echo "  exposition: $(wc -c < "$t/m") bytes, $(grep -vc '^#' "$t/m") samples"
