#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_exporter_claims.sh EXPORTER CLI_ALLOC LEDGER_FORGE GPUCAP: what a tenant writes into its own
# ledger is not shown as the node's truth (issue 30). A ledger written by the library on a 16 GiB card
# is copied into another pod and every figure of its card entry rewritten to 1 PiB, as a tenant root
# can (ledger_forge): the budget, what is in use, the peak, the context reserves, the card's size,
# the budget before a change, the driver's limit; its change time put in the future. With the node's
# card sizes from NVML (the fake's, --cards nvml) no byte series of it passes 16 GiB, its driver's
# limit (1 PiB, then exactly the card) is no limit (not shown, "gpucap" enforces), the time is not
# in the future; a driver's limit it claims below the card is shown as its ledger says. Without
# NVML sizes (--cards list) the card's size is the ledgers' claim, labelled source="ledger", and a
# driver's limit not below the ledger's own card is none. `gpucap status` says the same of the file.
# An entry whose liveness lock is gone counts nothing; one without it counts what it claims.
set -u
exporter=$1 alloc=$2 forge=$3 gpucap=$4
. "$(dirname "$0")/../common.sh"
export FAKECUDA_MEM=16GiB GPUCAP_MEMORY_LIMIT=4GiB
root=$t/pods
uid_a=0a0a0a0a-1111-4222-8333-000000000001
uid_f=0f0f0f0f-1111-4222-8333-00000000000f
ldir() { echo "$root/$1/volumes/kubernetes.io~empty-dir/gpucap-ledger/$2"; }
mkdir -p "$(ldir $uid_a main)" "$(ldir $uid_f forged)"
GPUCAP_LEDGER=$(ldir $uid_a main)/gpucap.ledger GPUCAP_POD_NAMESPACE=team GPUCAP_POD_NAME=p GPUCAP_POD_UID=$uid_a \
    GPUCAP_CONTAINER_NAME=main LD_PRELOAD=$TEST_PRELOAD "$alloc" a100 > /dev/null 2>&1 || bad "the container did not run"
GPUCAP_LEDGER=$(ldir $uid_f forged)/gpucap.ledger GPUCAP_POD_NAMESPACE=team GPUCAP_POD_NAME=f GPUCAP_POD_UID=$uid_f \
    GPUCAP_CONTAINER_NAME=forged LD_PRELOAD=$TEST_PRELOAD "$alloc" a100 > /dev/null 2>&1 || bad "forged did not run"
f=$(ldir $uid_f forged)/gpucap.ledger
PiB=$((1 << 50)) card=$((16 << 30))
future=4000000000
"$forge" set "$f" physical=$PiB limit=$PiB used=$PiB peak=$PiB contexts=$PiB limit_was=$PiB driver_limit=$PiB \
    changes=1 changed_s=$future || bad "could not forge"
scrape() { "$exporter" --once --root "$root" "$@" > "$t/out" 2> "$t/err" || bad "--once $*: $(cat "$t/err")"; }
of_forged() { grep "uid=\"$uid_f\"" "$t/out"; }

scrape --cards nvml
# Every byte series of a container, and the card's size, at most the card (the card's sums of budgets
# may pass it: that is over-commit, which its alert is for; one forged budget counts as the card).
over=$(grep -E '^gpucap_container_[a-z_]*bytes\{|^gpucap_gpu_memory_bytes\{' "$t/out" | awk -v c=$card '$NF > c')
[ -z "$over" ] || bad "figures above the 16 GiB card: $over"
[ "$(grep '^gpucap_gpu_budgets_bytes' "$t/out" | awk '{print $NF}')" = $((card + (4 << 30))) ] ||
    bad "the card's budgets: the forged one as the card, and the real 4 GiB: $(grep '^gpucap_gpu_budgets_bytes' "$t/out")"
[ -n "$(of_forged | grep '^gpucap_container_budget_bytes' | awk -v c=$card '$NF == c')" ] ||
    bad "the forged budget shows as the card's size: $(of_forged | grep budget_bytes)"
of_forged | grep -q '^gpucap_container_driver_limit_bytes' &&
    bad "a driver's limit of 1 PiB on a 16 GiB card is shown: $(of_forged | grep driver_limit)"
of_forged | grep -qE '^gpucap_container_enforcement_info\{.*enforced_by="gpucap"\} 1$' ||
    bad "a driver's limit of 1 PiB said to enforce: $(of_forged | grep enforcement)"
now=$(date +%s)
when=$(of_forged | sed -n 's/^gpucap_container_budget_changed_timestamp_seconds{.*} //p')
[ -n "$when" ] && [ "$when" -le $((now + 5)) ] || bad "a change time in the future: $when (now $now)"
grep -qE '^gpucap_gpu_memory_bytes\{.*source="nvml"\} '$card'$' "$t/out" ||
    bad "the card's size from NVML: $(grep '^gpucap_gpu_memory_bytes' "$t/out")"
# A limit exactly the card's size limits nothing; one below it is shown as the ledger records it.
"$forge" set "$f" driver_limit=$card
scrape --cards nvml
of_forged | grep -q '^gpucap_container_driver_limit_bytes' && bad "a driver's limit equal to the card is shown"
of_forged | grep -qE 'enforced_by="gpucap"' || bad "a driver's limit equal to the card said to enforce"
"$forge" set "$f" driver_limit=$((8 << 30))
scrape --cards nvml
[ "$(of_forged | sed -n 's/^gpucap_container_driver_limit_bytes{.*} //p')" = $((8 << 30)) ] ||
    bad "a driver's limit below the card: $(of_forged | grep driver_limit)"
# Without sizes from the node: the card's size is the ledgers' (labelled), and a driver's limit not
# below the ledger's own card is none.
uuid=$(sed -n 's/^gpucap_gpu_memory_bytes{UUID="\([^"]*\)".*/\1/p' "$t/out" | head -1)
"$forge" set "$f" physical=$card driver_limit=$PiB
scrape --cards "list:$uuid"
grep -qE '^gpucap_gpu_memory_bytes\{UUID="'"$uuid"'",source="ledger"\} ' "$t/out" ||
    bad "a card size from the ledgers is not labelled as theirs: $(grep '^gpucap_gpu_memory_bytes' "$t/out")"
of_forged | grep -q '^gpucap_container_driver_limit_bytes' && bad "--cards list: a driver's limit above the ledger's card shown"
of_forged | grep -qE 'enforced_by="gpucap"' || bad "--cards list: a driver's limit above the ledger's card said to enforce"
if command -v promtool > /dev/null; then
    promtool check metrics < "$t/out" > "$t/lint" 2>&1 || bad "promtool: $(cat "$t/lint")"
fi
# Liveness (issue 34): an entry that claims to hold its liveness lock and does not is a process
# gone (nothing in use, no process, not above its budget); one that says nothing of it cannot be
# told, and what it holds counts (the tenant's own figures, bounded by the card as above).
"$forge" set "$f" limit=$((1 << 30)) used=$((2 << 30)) peak=$((2 << 30))
scrape --cards nvml
[ "$(of_forged | sed -n 's/^gpucap_container_used_bytes{.*} //p')" = $((2 << 30)) ] &&
    [ "$(of_forged | sed -n 's/^gpucap_container_processes{.*} //p')" = 1 ] &&
    [ "$(of_forged | sed -n 's/^gpucap_container_above_budget{.*} //p')" = 1 ] ||
    bad "an entry without a liveness lock: $(of_forged | grep -E 'used_bytes|processes|above')"
"$forge" set "$f" alive_lock=1
scrape --cards nvml
[ "$(of_forged | sed -n 's/^gpucap_container_used_bytes{.*} //p')" = 0 ] &&
    [ "$(of_forged | sed -n 's/^gpucap_container_processes{.*} //p')" = 0 ] &&
    [ "$(of_forged | sed -n 's/^gpucap_container_above_budget{.*} //p')" = 0 ] &&
    [ "$(of_forged | sed -n 's/^gpucap_container_peak_bytes{.*} //p')" = $((2 << 30)) ] ||
    bad "an entry whose liveness lock is gone: $(of_forged | grep -E 'used_bytes|processes|above|peak')"
# gpucap status reads the same file the same way.
"$forge" set "$f" physical=$card driver_limit=$card
"$gpucap" status --ledger "$f" > "$t/status" 2>&1 || bad "status: $(cat "$t/status")"
grep -q "enforced by: gpucap$" "$t/status" || bad "status of a driver's limit equal to the card: $(cat "$t/status")"
"$gpucap" status --json --ledger "$f" > "$t/status.json" 2>&1
grep -q '"enforced_by":"gpucap"' "$t/status.json" || bad "status --json: $(cat "$t/status.json")"
exit $fail
