#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_exporter_scale.sh EXPORTER LEDGER_FORGE: no silent cap on the ledgers of a node, and a scrape
# reads only what it shows (issue 30). 10,001 ledgers (one file hard-linked into 10,001 container
# directories: the path names each) are all read and shown, the bound is a metric
# (gpucap_exporter_ledgers_limit, at least 10,000); past the bound the rest are counted (reason
# "limit") and the exporter warns. Over one scrape of the server, the bytes it read (/proc/PID/io
# rchar) stay below 64 KiB a ledger: the header, the device entries and the process entries in use,
# not the whole 1 MiB file.
set -u
exporter=$1 forge=$2
command -v curl > /dev/null || { echo "SKIP: curl"; exit 77; }
. "$(dirname "$0")/../common.sh"
"$forge" make "$t/pods" 10001 --links || bad "could not write the ledgers"
"$exporter" --once --root "$t/pods" --cards none > "$t/out" 2> "$t/err" || bad "--once: $(cat "$t/err")"
expect "all 10,001 ledgers read" '^gpucap_exporter_ledgers 10001$' out
expect "none skipped for the bound" '^gpucap_exporter_ledgers_skipped\{reason="limit"\} 0$' out
limit=$(sed -n 's/^gpucap_exporter_ledgers_limit //p' "$t/out")
[ -n "$limit" ] && [ "$limit" -ge 10000 ] || bad "the bound is a metric of at least 10,000: '$limit'"
[ "$(grep -c '^gpucap_container_info{' "$t/out")" = 10001 ] || bad "10,001 containers shown"
absent "no warning within the bound" 'warning' err

# Past the bound: counted, warned, and the bound's ledgers still shown.
over=$((limit + 3))
"$forge" make "$t/many" "$over" --links || bad "could not write $over ledgers"
"$exporter" --once --root "$t/many" --cards none > "$t/out" 2> "$t/err" || bad "--once past the bound: $(cat "$t/err")"
expect "the bound's ledgers shown" "^gpucap_exporter_ledgers $limit$" out
expect "the rest counted" '^gpucap_exporter_ledgers_skipped\{reason="limit"\} 3$' out
expect "a warning" "warning: 3 ledgers not read: past the bound of $limit" err

# What one scrape reads.
"$exporter" --listen 127.0.0.1:0 --root "$t/pods" --cards none 2> "$t/log" &
pid=$!
port=$(listen_port "$t/log" $pid) || bad "the exporter did not start: $(cat "$t/log")"
curl -sf -o /dev/null "http://127.0.0.1:$port/metrics" || bad "scrape"
before=$(sed -n 's/^rchar: //p' /proc/$pid/io)
curl -sf -o "$t/m" "http://127.0.0.1:$port/metrics" || bad "scrape"
after=$(sed -n 's/^rchar: //p' /proc/$pid/io)
per=$(((after - before) / 10001))
echo "one scrape of 10,001 ledgers read $((after - before)) bytes: $per a ledger"
[ "$per" -lt 65536 ] || bad "a scrape read $per bytes a ledger (a ledger is $((1 << 20)) and more)"
kill $pid
wait $pid 2> /dev/null
exit $fail
