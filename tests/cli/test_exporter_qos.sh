#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_exporter_qos.sh EXPORTER CLI_ALLOC LEDGER_FORGE: the burstable-memory series of gpucap-exporter
# (issue 35). Three containers run under the library on one fake 16 GiB card (their ledgers made by
# the library); their QoS figures are then written as the library and the node arbiter would:
#   - plain: no QoS at all: none of the QoS series (the families' HELP only);
#   - ledger: a burstable ledger (qos_flags) with request 1 GiB, limit 4 GiB, grant 3 GiB, 5 loan asks,
#     and no qos.state: its figures from the ledger, loaned = grant - request; then the same ledger
#     forged to 1 PiB each: every figure at most the card, the request and grant at most the limit;
#   - arbiter: a ledger claiming one thing and the arbiter's qos.state another: the arbiter's request,
#     limit, grant, reclaims by action and overcommitted flag shown.
# The node's cards.state (--arbiter-state): lendable, loaned, requested per card, 1 PiB bounded to the
# card, a card the node lacks not shown, overcommitted when the requests pass the card's size; no
# --arbiter-state: no card QoS series. Hostile state files (a symbolic link, a FIFO, a file past the
# size bound, lines with a bad UUID, a missing key, a number past 64 bits, a repeated card) are left
# out and counted (gpucap_exporter_arbiter_state_lines_refused), never followed, never hang a scrape.
# A container whose settings have memory_request (as gpucap inject writes them) shows the library's own
# record: request, limit, no grant, its budget in force the request (no arbiter), where the library
# knows memory_request (gpucap check says so; the library's part of issue 35).
# promtool check metrics passes when promtool is installed.
set -u
exporter=$1 alloc=$2 forge=$3 gpucap=${4:-}
. "$(dirname "$0")/../common.sh"
export FAKECUDA_MEM=16GiB GPUCAP_MEMORY_LIMIT=4GiB
root=$t/pods
uid_p=0a0a0a0a-1111-4222-8333-000000000001
uid_l=0b0b0b0b-1111-4222-8333-000000000002
uid_a=0c0c0c0c-1111-4222-8333-000000000003
GiB=$((1 << 30)) PiB=$((1 << 50)) card=$((16 << 30))
ldir() { echo "$root/$1/volumes/kubernetes.io~empty-dir/gpucap-ledger/$2"; }
sdir() { echo "$root/$1/volumes/kubernetes.io~empty-dir/gpucap-lib/$2"; }
for pc in "$uid_p plain" "$uid_l ledger" "$uid_a arbiter"; do
    set -- $pc
    mkdir -p "$(ldir "$1" "$2")"
    GPUCAP_LEDGER=$(ldir "$1" "$2")/gpucap.ledger GPUCAP_POD_NAMESPACE=team GPUCAP_POD_NAME=p-$2 GPUCAP_POD_UID=$1 \
        GPUCAP_CONTAINER_NAME=$2 LD_PRELOAD=$TEST_PRELOAD "$alloc" a100 > /dev/null 2>&1 || bad "$2 did not run"
done
scrape() { timeout 20 "$exporter" --once --root "$root" --cards nvml "$@" > "$t/out" 2> "$t/err" || bad "--once $*: $(cat "$t/err")"; }
# value NAME UID [LABEL-FRAGMENT]: the value of NAME's series of container UID (with the fragment)
value() { grep "^$1{" "$t/out" | grep "uid=\"$2\"" | grep -e "${3:-}" | awk '{print $NF}'; }
scrape
uuid=$(sed -n 's/^gpucap_gpu_memory_bytes{UUID="\([^"]*\)".*/\1/p' "$t/out")
[ -n "$uuid" ] || bad "no card from the fake NVML"
for fam in request_bytes limit_bytes grant_bytes loaned_bytes reclaims_total overcommitted; do
    grep -q "^# TYPE gpucap_container_$fam " "$t/out" || bad "family gpucap_container_$fam not declared"
    grep -q "^gpucap_container_$fam{" "$t/out" && bad "a QoS series with no QoS anywhere: $(grep "^gpucap_container_$fam{" "$t/out" | head -1)"
done
grep -q '^gpucap_card_lendable_bytes{' "$t/out" && bad "card series without --arbiter-state"

# The ledger's own record (the library's), no arbiter.
"$forge" set "$(ldir $uid_l ledger)/gpucap.ledger" qos_flags=1 qos_request=$GiB qos_limit=$((4 * GiB)) \
    qos_grant=$((3 * GiB)) loan_asks=5 loaned_peak=$((2 * GiB)) || bad "forge ledger"
scrape
[ "$(value gpucap_container_request_bytes $uid_l)" = $GiB ] || bad "ledger: request $(value gpucap_container_request_bytes $uid_l)"
[ "$(value gpucap_container_limit_bytes $uid_l)" = $((4 * GiB)) ] || bad "ledger: limit"
[ "$(value gpucap_container_grant_bytes $uid_l)" = $((3 * GiB)) ] || bad "ledger: grant"
[ "$(value gpucap_container_loaned_bytes $uid_l)" = $((2 * GiB)) ] || bad "ledger: loaned = grant - request: $(value gpucap_container_loaned_bytes $uid_l)"
[ "$(value gpucap_container_loan_asks_total $uid_l)" = 5 ] || bad "ledger: loan asks"
[ "$(value gpucap_container_loaned_peak_bytes $uid_l)" = $((2 * GiB)) ] || bad "ledger: loaned peak"
[ -z "$(value gpucap_container_reclaims_total $uid_l)" ] || bad "ledger: reclaims are the arbiter's, none without it"
[ -z "$(value gpucap_container_request_bytes $uid_p)" ] || bad "plain: no request series"
# Forged to 1 PiB: bounded by the card; a request above the limit is the limit (as the library reads it).
"$forge" set "$(ldir $uid_l ledger)/gpucap.ledger" qos_request=$PiB qos_limit=$((8 * GiB)) qos_grant=$PiB \
    loaned_peak=$PiB || bad "forge 1 PiB"
scrape
over=$(grep -E '^gpucap_container_[a-z_]*bytes\{' "$t/out" | awk -v c=$card '$NF > c')
[ -z "$over" ] || bad "figures above the 16 GiB card: $over"
[ "$(value gpucap_container_request_bytes $uid_l)" = $((8 * GiB)) ] || bad "forged request: at most the limit: $(value gpucap_container_request_bytes $uid_l)"
[ "$(value gpucap_container_grant_bytes $uid_l)" = $((8 * GiB)) ] || bad "forged grant: at most the limit"
[ "$(value gpucap_container_loaned_bytes $uid_l)" = 0 ] || bad "forged: nothing loaned at request = grant"

# The arbiter's qos.state wins over the ledger's claim.
"$forge" set "$(ldir $uid_a arbiter)/gpucap.ledger" qos_flags=1 qos_request=$((4 * GiB)) qos_limit=$((4 * GiB)) \
    qos_grant=0 || bad "forge arbiter's ledger"
mkdir -p "$(sdir $uid_a arbiter)"
state=$(sdir $uid_a arbiter)/qos.state
printf '%s request=%d limit=%d grant=%d used=%d reclaims_kill=2 reclaims_evict=1 reclaims_deny=0 overcommitted=1\n' \
    "$uuid" $GiB $((6 * GiB)) $((5 * GiB)) $((5 * GiB)) > "$state"
scrape
[ "$(value gpucap_container_request_bytes $uid_a)" = $GiB ] || bad "arbiter: request $(value gpucap_container_request_bytes $uid_a)"
[ "$(value gpucap_container_limit_bytes $uid_a)" = $((6 * GiB)) ] || bad "arbiter: limit"
[ "$(value gpucap_container_loaned_bytes $uid_a)" = $((4 * GiB)) ] || bad "arbiter: loaned"
[ "$(value gpucap_container_reclaims_total $uid_a 'action="kill"')" = 2 ] || bad "arbiter: kills: $(grep reclaims_total "$t/out")"
[ "$(value gpucap_container_reclaims_total $uid_a 'action="evict"')" = 1 ] || bad "arbiter: evictions"
[ "$(value gpucap_container_reclaims_total $uid_a 'action="deny"')" = 0 ] || bad "arbiter: denials"
[ "$(value gpucap_container_overcommitted $uid_a)" = 1 ] || bad "arbiter: overcommitted"
grep -q '^gpucap_exporter_arbiter_state_lines_refused 0$' "$t/out" || bad "a good state refused"
# An arbiter's 1 PiB is bounded too.
printf '%s request=%d limit=%d grant=%d used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=0\n' \
    "$uuid" $PiB $PiB $PiB > "$state"
scrape
[ "$(value gpucap_container_limit_bytes $uid_a)" = $card ] || bad "arbiter 1 PiB limit: $(value gpucap_container_limit_bytes $uid_a)"

# Hostile qos.state files: never followed, never read past the bound; the ledger's figures stay.
hostile() { # hostile WHAT: the scrape takes the ledger's request (4 GiB) for the arbiter's container
    scrape
    [ "$(value gpucap_container_request_bytes $uid_a)" = $((4 * GiB)) ] ||
        bad "$1: request $(value gpucap_container_request_bytes $uid_a), want the ledger's"
    [ -z "$(value gpucap_container_reclaims_total $uid_a)" ] || bad "$1: reclaims shown"
}
good="$uuid request=1 limit=2 grant=2 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=0"
echo "$good" > "$t/elsewhere"
rm -f "$state"; ln -s "$t/elsewhere" "$state"; hostile "a symbolic link"
rm -f "$state"; mkfifo "$state"; hostile "a FIFO"
rm -f "$state"; { echo "$good"; head -c 20000 /dev/zero | tr '\0' ' '; } > "$state"; hostile "a file past 16 KiB"
rm -f "$state"; printf '%s\0\n' "$good" > "$state"; hostile "a NUL"
rm -f "$state"; mkdir "$state"; hostile "a directory"
rmdir "$state"
# The container's directory, and the pod's gpucap-lib, as links to a directory with a good state.
mkdir -p "$t/other/arbiter" && echo "$good" > "$t/other/arbiter/qos.state"
mv "$(sdir $uid_a arbiter)" "$t/saved" && ln -s "$t/other/arbiter" "$(sdir $uid_a arbiter)"
hostile "the container's directory a symbolic link"
rm "$(sdir $uid_a arbiter)"; mv "$(dirname "$(sdir $uid_a arbiter)")" "$t/saved-lib"
ln -s "$t/other" "$(dirname "$(sdir $uid_a arbiter)")"
hostile "the pod's gpucap-lib a symbolic link"
rm "$(dirname "$(sdir $uid_a arbiter)")"; mv "$t/saved-lib" "$(dirname "$(sdir $uid_a arbiter)")"
mv "$t/saved" "$(sdir $uid_a arbiter)"
other=GPU-deadbeef-0000-4000-8000-0000000000ff
{
    echo "GPU-nothex-0000-4000-8000-0000000000ff request=1 limit=2 grant=2 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=0"
    echo "$uuid request=1 limit=2 grant=2 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0"
    echo "$uuid request=18446744073709551616 limit=2 grant=2 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=0"
    echo "$uuid request=-1 limit=2 grant=2 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=0"
    echo "$uuid request=1 request=1 limit=2 grant=2 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=0"
    echo "$uuid request=1 limit=2 grant=2 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=2"
} > "$state"
hostile "bad lines"
grep -q '^gpucap_exporter_arbiter_state_lines_refused 6$' "$t/out" ||
    bad "six bad lines refused: $(grep '^gpucap_exporter_arbiter_state_lines_refused' "$t/out")"
# A good line, a repeat of its card (refused), a card the container lacks (passed over), a key of a newer arbiter.
{
    echo "$uuid request=$GiB limit=$((2 * GiB)) grant=$GiB used=0 reclaims_kill=3 reclaims_evict=0 reclaims_deny=0 overcommitted=0 newer=7"
    echo "$uuid request=$((2 * GiB)) limit=$((2 * GiB)) grant=$GiB used=0 reclaims_kill=9 reclaims_evict=0 reclaims_deny=0 overcommitted=0"
    echo "$other request=1 limit=2 grant=2 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=0"
} > "$state"
scrape
[ "$(value gpucap_container_request_bytes $uid_a)" = $GiB ] || bad "the first line of a card: $(value gpucap_container_request_bytes $uid_a)"
[ "$(value gpucap_container_reclaims_total $uid_a 'action="kill"')" = 3 ] || bad "the repeat refused"
grep -q '^gpucap_exporter_arbiter_state_lines_refused 1$' "$t/out" || bad "one repeat refused: $(grep refused "$t/out")"
grep -q "$other" "$t/out" && bad "a card the container lacks is shown"

# The node's cards.state.
mkdir -p "$t/state"
printf '%s size=%d lendable=%d loaned=%d requested=%d\n%s size=1 lendable=1 loaned=1 requested=1\n' \
    "$uuid" $card $((3 * GiB)) $((4 * GiB)) $((9 * GiB)) "$other" > "$t/state/cards.state"
scrape --arbiter-state "$t/state"
card_value() { grep "^$1{UUID=\"$uuid\"" "$t/out" | awk '{print $NF}'; }
[ "$(card_value gpucap_card_lendable_bytes)" = $((3 * GiB)) ] || bad "lendable: $(card_value gpucap_card_lendable_bytes)"
[ "$(card_value gpucap_card_loaned_bytes)" = $((4 * GiB)) ] || bad "loaned"
[ "$(card_value gpucap_card_requested_bytes)" = $((9 * GiB)) ] || bad "requested"
[ "$(card_value gpucap_card_overcommitted)" = 0 ] || bad "not overcommitted"
# A container the arbiter made best effort on the card makes the card overcommitted (its usable size
# is below its size: the arbiter's reserve).
echo "$uuid request=0 limit=$GiB grant=0 used=0 reclaims_kill=0 reclaims_evict=0 reclaims_deny=0 overcommitted=1" > "$state"
scrape --arbiter-state "$t/state"
[ "$(card_value gpucap_card_overcommitted)" = 1 ] || bad "a best-effort container: the card overcommitted"
grep -q "$other" "$t/out" && bad "a card the node lacks: $(grep "$other" "$t/out" | head -1)"
printf '%s size=%d lendable=%d loaned=%d requested=%d\n' "$uuid" $card $PiB $PiB $((20 * GiB)) > "$t/state/cards.state"
scrape --arbiter-state "$t/state"
[ "$(card_value gpucap_card_lendable_bytes)" = $card ] || bad "1 PiB lendable: $(card_value gpucap_card_lendable_bytes)"
[ "$(card_value gpucap_card_overcommitted)" = 1 ] || bad "requests past the card: overcommitted"
rm "$t/state/cards.state"; mkfifo "$t/state/cards.state"
scrape --arbiter-state "$t/state"
grep -q '^gpucap_card_lendable_bytes{' "$t/out" && bad "a FIFO as cards.state"
rm "$t/state/cards.state"; ln -s "$t/elsewhere" "$t/state/cards.state"
scrape --arbiter-state "$t/state"
grep -q '^gpucap_card_lendable_bytes{' "$t/out" && bad "a symbolic link as cards.state"
scrape --arbiter-state "$t/nonexistent"

# The library's own record, from settings as the webhook's init container writes them.
uid_r=0d0d0d0d-1111-4222-8333-000000000004
mkdir -p "$(ldir $uid_r lib)"
printf '[gpucap]\nmemory_limit = 2GiB\nmemory_request = 1GiB\nledger = %s\n' "$(ldir $uid_r lib)/gpucap.ledger" > "$t/lib.ini"
if [ -n "$gpucap" ] && env -i PATH="$PATH" "$gpucap" check "$t/lib.ini" 2>&1 | grep -q 'burstable: request'; then
    env -u GPUCAP_MEMORY_LIMIT -u GPUCAP_LEDGER GPUCAP_CONFIG=$t/lib.ini GPUCAP_POD_NAMESPACE=team GPUCAP_POD_NAME=p-lib GPUCAP_POD_UID=$uid_r \
        GPUCAP_CONTAINER_NAME=lib LD_PRELOAD=$TEST_PRELOAD "$alloc" a100 > "$t/lib.out" 2>&1 || bad "lib did not run: $(cat "$t/lib.out")"
    scrape
    [ "$(value gpucap_container_request_bytes $uid_r)" = $GiB ] || bad "library: request $(value gpucap_container_request_bytes $uid_r)"
    [ "$(value gpucap_container_limit_bytes $uid_r)" = $((2 * GiB)) ] || bad "library: limit"
    [ "$(value gpucap_container_grant_bytes $uid_r)" = 0 ] || bad "library: no grant without an arbiter"
    [ "$(value gpucap_container_budget_bytes $uid_r)" = $GiB ] || bad "library: in force = the request: $(value gpucap_container_budget_bytes $uid_r)"
else
    bad "gpucap check does not say the burstable budget of memory_request (the library's record cannot be checked)"
fi

if command -v promtool > /dev/null; then
    printf '%s size=%d lendable=%d loaned=%d requested=%d\n' "$uuid" $card $GiB 0 $GiB > "$t/state/cards.state.new"
    rm -f "$t/state/cards.state"; mv "$t/state/cards.state.new" "$t/state/cards.state"
    scrape --arbiter-state "$t/state"
    promtool check metrics < "$t/out" > "$t/lint" 2>&1 || bad "promtool: $(cat "$t/lint")"
fi
[ $fail = 0 ] && echo "ok: exporter QoS series"
exit $fail
