#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_exporter_dead.sh EXPORTER CLI_ALLOC GPUCAP: a container's process holding 100 MiB is killed
# (SIGKILL: it frees nothing, its share stays in the ledger until a process of the container reaps
# it), the budget is lowered live below what it held: gpucap-exporter, from the node (another PID
# namespace would change nothing: it asks the entries' locks), says what `gpucap status` says in
# the container: in use, above the budget or not, how many processes (issue 31).
set -u
exporter=$1 alloc=$2 gpucap=$3
command -v curl > /dev/null || { echo "SKIP: curl is missing"; exit 77; }
. "$(dirname "$0")/../common.sh"
root=$t/pods uid=0d0d0d0d-1111-4222-8333-000000000004
dir=$root/$uid/volumes/kubernetes.io~empty-dir/gpucap-ledger/main
mkdir -p "$dir"
export GPUCAP_LEDGER=$dir/gpucap.ledger GPUCAP_MEMORY_LIMIT=256MiB GPUCAP_CONTEXT_RESERVE=0 \
    GPUCAP_POD_NAMESPACE=team-d GPUCAP_POD_NAME=job-0 GPUCAP_POD_UID=$uid GPUCAP_CONTAINER_NAME=main
LD_PRELOAD=$TEST_PRELOAD "$alloc" a100 s600 > "$t/a.out" 2>&1 &
a=$!
sleep 0.5
kill -9 $a
wait $a 2> /dev/null
# Lowered to 64 MiB while no process of the container runs.
"$gpucap" set-memory --ledger "$GPUCAP_LEDGER" --wait 1 64MiB > "$t/low" 2>&1 || bad "set-memory: $(cat "$t/low")"

"$exporter" --listen 127.0.0.1:0 --root "$root" 2> "$t/log" &
port=$(listen_port "$t/log" $!) || { echo "FAIL exporter did not start: $(cat "$t/log")"; exit 1; }
value() { grep -E "^$2\{[^}]*container=\"main\"[^}]*\} " "$t/$1" | awk '{print $NF}'; }
# compare NAME WANT_IN_USE: the exporter's figures against status's, and status's against WANT.
compare() {
    curl -sf "http://127.0.0.1:$port/metrics" > "$t/m.$1" || bad "scrape"
    "$gpucap" status --json --ledger "$GPUCAP_LEDGER" > "$t/st.$1.json" || bad "status: $(cat "$t/st.$1.json")"
    local in_use above procs
    read -r in_use above procs < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
dev = d["devices"][0]
print(dev["in_use"], int(dev["above_budget"]), sum(1 for p in d["processes"] if p["alive"]))' "$t/st.$1.json")
    [ "$in_use" = "$2" ] || bad "$1: status says $in_use in use, want $2"
    [ "$(value m.$1 gpucap_container_used_bytes)" = "$in_use" ] ||
        bad "$1: exporter used $(value m.$1 gpucap_container_used_bytes), status says $in_use"
    [ "$(value m.$1 gpucap_container_above_budget)" = "$above" ] && [ "$above" = 0 ] ||
        bad "$1: above the budget: exporter $(value m.$1 gpucap_container_above_budget), status $above"
    [ "$(value m.$1 gpucap_container_processes)" = "$procs" ] ||
        bad "$1: processes: exporter $(value m.$1 gpucap_container_processes), status $procs alive"
}
compare idle 0
# A process joins, applies the pending lowering (dead shares reaped first) and holds 9 MiB.
LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 a1 s600 > "$t/b.out" 2>&1 &
sleep 0.5
compare joined $((9 * MiB))
[ "$(value m.joined gpucap_container_budget_bytes)" = $((64 * MiB)) ] ||
    bad "budget: $(value m.joined gpucap_container_budget_bytes)"
exit $fail
