#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_exporter_cards.sh EXPORTER CLI_ALLOC: gpucap-exporter shows cards this node has, only (issue 23),
# with DCGM's card labels, and the container's mode. A ledger written by the library is copied into
# another pod and its card entry rewritten to a card the node lacks, with a 1 PiB budget: with the
# node's cards from the fake NVML (--cards auto), from /proc-style files or from a list, no series
# names that card and gpucap_exporter_foreign_cards counts it; with --cards none (no check) it shows,
# which is what happened before. A container run in audit mode carries mode="audit". A source that
# finds no card makes /readyz fail with the reason until the card is found (asked again). Each card
# of a container has its index among the container's cards.
set -u
exporter=$1 alloc=$2
command -v python3 > /dev/null || { echo "SKIP: python3"; exit 77; }
. "$(dirname "$0")/../common.sh"
root=$t/pods
uid_a=0a0a0a0a-1111-4222-8333-000000000001
uid_f=0f0f0f0f-1111-4222-8333-00000000000f
uid_m=0d0d0d0d-1111-4222-8333-00000000000d
ldir() { echo "$root/$1/volumes/kubernetes.io~empty-dir/gpucap-ledger/$2"; }
run() { # run UID CONTAINER MODE OPS...
    local uid=$1 ctr=$2 mode=$3
    shift 3
    mkdir -p "$(ldir "$uid" "$ctr")"
    GPUCAP_LEDGER=$(ldir "$uid" "$ctr")/gpucap.ledger GPUCAP_MEMORY_LIMIT=64MiB GPUCAP_MODE=$mode \
        GPUCAP_POD_NAMESPACE=team GPUCAP_POD_NAME=p-$ctr GPUCAP_POD_UID=$uid GPUCAP_CONTAINER_NAME=$ctr \
        LD_PRELOAD=$TEST_PRELOAD "$alloc" "$@" > /dev/null 2>&1
}
run $uid_a main enforce a24 a100 p || bad "main did not run"
run $uid_f forged enforce a8 p || bad "forged did not run"
run $uid_m audited audit a100 p || bad "audited did not run"
real=$(FAKECUDA_MEM=1GiB "$exporter" --once --root "$root" --cards nvml | sed -n 's/^gpucap_gpu_memory_bytes{UUID="\([^"]*\)".*/\1/p')
[ -n "$real" ] || bad "no card from the fake NVML"
forged=GPU-deadbeef-0000-4000-8000-0000000000ff
# The forged ledger: its one card entry now names $forged, with a 1 PiB budget.
python3 - "$(ldir $uid_f forged)/gpucap.ledger" "$real" "$forged" << 'PY' || bad "could not forge"
import sys
path, real, forged = sys.argv[1], sys.argv[2], sys.argv[3]
raw = lambda u: bytes.fromhex(u[4:].replace("-", ""))
data = bytearray(open(path, "rb").read())
at = data.find(raw(real))
assert at > 0, "the card's uuid is not in the ledger"
data[at:at + 16] = raw(forged)
# struct gpc_ledger_dev: uuid[16], physical (8), then the slot, whose first field is the limit.
data[at + 16:at + 24] = (1 << 50).to_bytes(8, "little")
data[at + 24:at + 32] = (1 << 50).to_bytes(8, "little")
open(path, "wb").write(data)
PY
scrape() { "$exporter" --once --root "$root" "$@" > "$t/out" 2> "$t/err" || bad "--once $*: $(cat "$t/err")"; }

scrape --cards none
grep -q "UUID=\"$forged\"" "$t/out" || bad "--cards none: the forged card should show (no check), so this test can fail"
for src in auto nvml "list:$real" "proc:$t/proc"; do
    mkdir -p "$t/proc/0000:3b:00.0"
    printf 'Model: \t\t Fake GPU 0\nIRQ:   1\nGPU UUID: \t %s\nDevice Minor: \t 0\n' "$real" > "$t/proc/0000:3b:00.0/information"
    scrape --cards "$src"
    grep -q "$forged" "$t/out" && bad "--cards $src: a series of the forged card: $(grep "$forged" "$t/out" | head -1)"
    grep -q "^gpucap_exporter_foreign_cards 1$" "$t/out" || bad "--cards $src: foreign cards $(grep '^gpucap_exporter_foreign_cards' "$t/out")"
    budgets=$(sed -n "s/^gpucap_gpu_budgets_bytes{UUID=\"$real\"[^}]*} //p" "$t/out")
    [ "$budgets" = $((128 * 1048576)) ] || bad "--cards $src: budgets of the real card $budgets (want 2 x 64 MiB)"
    grep -q "uid=\"$uid_f\".*UUID=" "$t/out" && bad "--cards $src: the forged container's card entry shows"
done
scrape --cards auto
grep -qE "^gpucap_gpu_memory_bytes\{UUID=\"$real\",gpu=\"0\",model_name=\"Fake GPU 0\",source=\"nvml\"\} 1073741824$" "$t/out" ||
    bad "card labels (UUID, gpu, model_name): $(grep '^gpucap_gpu_memory_bytes' "$t/out")"
scrape --cards "proc:$t/proc"
grep -qE "^gpucap_gpu_budgets_bytes\{UUID=\"$real\",gpu=\"0\",model_name=\"Fake GPU 0\"\} " "$t/out" ||
    bad "/proc labels: $(grep '^gpucap_gpu_budgets_bytes' "$t/out")"
# A source that cannot be read is an error, not "every card".
LD_LIBRARY_PATH=/nonexistent "$exporter" --once --root "$root" --cards nvml > /dev/null 2>&1
[ $? = 2 ] || bad "--cards nvml without NVML should exit 2"
"$exporter" --once --root "$root" --cards list:not-a-uuid > /dev/null 2>&1
[ $? = 2 ] || bad "--cards list:not-a-uuid should exit 2"
LD_LIBRARY_PATH=/nonexistent "$exporter" --once --root "$root" --cards auto > "$t/out" 2> /dev/null
grep -q '^gpucap_gpu_budgets_bytes{' "$t/out" && [ ! -d /proc/driver/nvidia/gpus ] && bad "auto without any source shows cards"

# A ledger is writable by its tenant: a 1 PiB budget (and use) written on the node's real card counts
# as the card's size at most, in the container's series and in the card's sums (no over-commit from
# one forged figure).
cp "$(ldir $uid_a main)/gpucap.ledger" "$t/main.saved"
python3 - "$(ldir $uid_a main)/gpucap.ledger" "$real" << 'PY' || bad "could not forge main"
import sys
path, real = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
at = data.find(bytes.fromhex(real[4:].replace("-", "")))
assert at > 0, "the card's uuid is not in the ledger"
data[at + 24:at + 32] = (1 << 50).to_bytes(8, "little")  # the slot's limit
open(path, "wb").write(data)
PY
FAKECUDA_MEM=1GiB scrape --cards nvml
budgets=$(sed -n "s/^gpucap_gpu_budgets_bytes{UUID=\"$real\"[^}]*} //p" "$t/out")
[ "$budgets" = $((1024 * 1048576 + 64 * 1048576)) ] || bad "a 1 PiB budget on the real card: budgets $budgets (want 1 GiB + 64 MiB)"
grep -qE "^gpucap_container_budget_bytes\{[^}]*container=\"main\",UUID=\"$real\"\} 1073741824$" "$t/out" ||
    bad "main's forged budget: $(grep 'container_budget_bytes{.*main' "$t/out")"
cp "$t/main.saved" "$(ldir $uid_a main)/gpucap.ledger"

# The mode: enforce and audit containers apart, on the info and the denials.
scrape --cards auto
grep -qE "^gpucap_container_denials_total\{[^}]*container=\"main\",UUID=\"$real\",mode=\"enforce\"\} 1$" "$t/out" ||
    bad "enforce denials: $(grep 'denials_total{.*main' "$t/out")"
grep -qE "^gpucap_container_denials_total\{[^}]*container=\"audited\",UUID=\"$real\",mode=\"audit\"\} 1$" "$t/out" ||
    bad "audit denials: $(grep 'denials_total{.*audited' "$t/out")"
grep -qE "^gpucap_container_info\{[^}]*container=\"audited\",mode=\"audit\"," "$t/out" || bad "audit info"
if command -v promtool > /dev/null; then
    promtool check metrics < "$t/out" > "$t/lint" 2>&1 && [ ! -s "$t/lint" ] || bad "promtool: $(cat "$t/lint")"
fi
grep -q '^gpucap_exporter_cards 1$' "$t/out" || bad "the cards known: $(grep '^gpucap_exporter_cards' "$t/out")"
scrape --cards none
grep -q '^gpucap_exporter_cards' "$t/out" && bad "--cards none: a count of cards, where none are checked"

# The card's index among the container's own cards (HAMi's vdeviceid, issue 34): in the order of the
# node's index, whatever order the container touched them in; in the ledger's order without one; a
# container of one card has index 0 whatever the node calls it.
uid_d=0e0e0e0e-1111-4222-8333-00000000000e
export FAKECUDA_DEVICES=2
run $uid_d both enforce d1 a4 d0 a2 || bad "both did not run"
run $uid_d second enforce d1 a4 || bad "second did not run"
info() { sed -n "s/^gpucap_container_device_info{[^}]*container=\"$1\",UUID=\"\([^\"]*\)\",device=\"\([0-9]*\)\"} 1$/\1=\2/p" "$t/out" | sort | tr '\n' ' '; }
card0=GPU-fa4ec0da-0000-4000-8000-000000000000 card1=GPU-fa4ec0da-0000-4000-8000-000000000001
scrape --cards nvml
[ "$(info both)" = "$card0=0 $card1=1 " ] || bad "device index by the node's order: $(info both)"
[ "$(info second)" = "$card1=0 " ] || bad "a container of one card (the node's second): $(info second)"
scrape --cards none
[ "$(info both)" = "$card0=1 $card1=0 " ] || bad "device index without the node's (the ledger's order): $(info both)"
rm -rf "${root:?}/$uid_d"
unset FAKECUDA_DEVICES

# Readiness (issue 34): a source that finds no card (the driver not there yet) shows no container,
# so the exporter is not ready and says why; once the source gives the card (asked again every
# --cards-retry seconds), it is, and the containers show.
if command -v curl > /dev/null; then
    mkdir -p "$t/later"
    "$exporter" --listen 127.0.0.1:0 --root "$root" --cards "proc:$t/later" --cards-retry 1 2> "$t/log" &
    exp=$!
    port=$(listen_port "$t/log" $exp) || bad "the exporter did not start: $(cat "$t/log")"
    url=http://127.0.0.1:$port
    grep -q "warning: cards: none found" "$t/log" || bad "no card found is not said at start: $(cat "$t/log")"
    code=$(curl -s -o "$t/ready" -w '%{http_code}' "$url/readyz")
    [ "$code" = 503 ] && grep -q "no card of this node is known (--cards proc:$t/later: .*): every container's series is left out" \
        "$t/ready" || bad "readyz without a card: $code $(cat "$t/ready")"
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 503 ] || bad "healthz without a card"
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/livez")" = 200 ] || bad "livez without a card (the process serves)"
    curl -s "$url/metrics" > "$t/m0"
    grep -q '^gpucap_exporter_cards 0$' "$t/m0" && ! grep -q '^gpucap_container_used_bytes{' "$t/m0" ||
        bad "metrics without a card: $(grep -E '^gpucap_exporter_cards|^gpucap_container_used' "$t/m0")"
    mkdir -p "$t/later/0000:3b:00.0"
    printf 'Model: \t\t Fake GPU 0\nGPU UUID: \t %s\nDevice Minor: \t 0\n' "$real" > "$t/later/0000:3b:00.0/information"
    for _ in $(seq 50); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")" = 200 ] && break
        sleep 0.1
    done
    [ "$(curl -s "$url/readyz")" = ok ] || bad "readyz once the card is there: $(curl -s "$url/readyz")"
    curl -s "$url/metrics" > "$t/m1"
    grep -q '^gpucap_exporter_cards 1$' "$t/m1" && grep -q "^gpucap_container_used_bytes{.*UUID=\"$real\"" "$t/m1" ||
        bad "metrics once the card is there: $(grep -E '^gpucap_exporter_cards|^gpucap_container_used' "$t/m1")"
    grep -q "cards: 1 from proc, found after start" "$t/log" || bad "the card found later is not said: $(cat "$t/log")"
    kill $exp
    wait $exp
fi
exit $fail
