#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_exporter.sh EXPORTER CLI_ALLOC: gpucap-exporter over HTTP on a directory laid out like the
# kubelet's, with ledgers written by processes under the library (identity from GPUCAP_POD_*):
# promtool accepts the exposition; each container's figures match what the fake driver recorded for
# its processes; budgets add up per card; bad, torn and hostile files are skipped and counted by
# reason without stopping the scrape; a pod directory removed takes its series with it; a container
# whose processes exited or were killed shows no process, no use and no context reserve (their
# liveness locks are gone), as `gpucap status` says of the same ledger, from this PID namespace and
# from another (unshare -p, where allowed); /livez, /readyz.
set -u
exporter=$1 alloc=$2
command -v promtool > /dev/null || { echo "SKIP: promtool (Debian package prometheus) is missing"; exit 77; }
command -v curl > /dev/null || { echo "SKIP: curl is missing"; exit 77; }
. "$(dirname "$0")/../common.sh"
churners=()
root=$t/pods
uid_a=0a0a0a0a-1111-4222-8333-000000000001
uid_b=0b0b0b0b-1111-4222-8333-000000000002
uid_x=0c0c0c0c-1111-4222-8333-000000000003
ldir() { echo "$root/$1/volumes/kubernetes.io~empty-dir/gpucap-ledger/$2"; }

# run NS POD UID CONTAINER LIMIT RESERVE OPS...: a process of that container, its output in $t/UID.CONTAINER.out
run() {
    local ns=$1 pod=$2 uid=$3 ctr=$4 limit=$5 reserve=$6
    shift 6
    mkdir -p "$(ldir "$uid" "$ctr")"
    GPUCAP_LEDGER=$(ldir "$uid" "$ctr")/gpucap.ledger GPUCAP_MEMORY_LIMIT=$limit GPUCAP_CONTEXT_RESERVE=$reserve \
        GPUCAP_POD_NAMESPACE=$ns GPUCAP_POD_NAME=$pod GPUCAP_POD_UID=$uid GPUCAP_CONTAINER_NAME=$ctr \
        LD_PRELOAD=$TEST_PRELOAD "$alloc" "$@" > "$t/$uid.$ctr.out" 2> /dev/null
}

# Pod A: "main" allocates 24 + 16 MiB and is denied 100 MiB of its 64; "side" holds 8 MiB of 32 while
# the checks run. Pod B: "srv", 256 MiB of 960 with an 8 MiB context reserve. 1 GiB card: the
# budgets (1056 MiB) exceed it.
run team-a train-0 $uid_a main 64MiB 0 a24 a16 a100 p || bad "main did not run"
mkdir -p "$(ldir $uid_a side)"
GPUCAP_LEDGER=$(ldir $uid_a side)/gpucap.ledger GPUCAP_MEMORY_LIMIT=32MiB GPUCAP_CONTEXT_RESERVE=0 \
    GPUCAP_POD_NAMESPACE=team-a GPUCAP_POD_NAME=train-0 GPUCAP_POD_UID=$uid_a GPUCAP_CONTAINER_NAME=side \
    LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 s6000 > /dev/null 2>&1 &
run team-b infer-0 $uid_b srv 960MiB 8MiB a200 a56 a800 a1 p || bad "srv did not run"

"$exporter" --listen 127.0.0.1:0 --root "$root" 2> "$t/log" &
exp=$!
port=$(listen_port "$t/log" $exp) || { echo "FAIL exporter did not start: $(cat "$t/log")"; exit 1; }
url=http://127.0.0.1:$port

scrape() { curl -sf "$url/metrics" > "$t/$1" || bad "scrape $1: curl failed"; }
# value FILE METRIC LABELS-REGEX: the value of the one sample that matches.
value() { grep -E "^$2\{[^}]*$3[^}]*\} " "$t/$1" | awk '{print $NF}'; }
# scraped FILE SERIES LABELS WANT: scrapes into $t/FILE; status 0 when the value there is WANT.
scraped() { scrape "$1" && [ "$(value "$1" "$2" "$3")" = "$4" ]; }
waitfor scraped m1 gpucap_container_used_bytes 'container="side"' $((8 * MiB))
promtool check metrics < "$t/m1" > "$t/lint" 2>&1 || bad "promtool: $(cat "$t/lint")"
[ -s "$t/lint" ] && bad "promtool lint: $(cat "$t/lint")"

# Each container against its processes' own figures: the fake driver's record and the denials seen.
check_ctr() { # check_ctr UID CONTAINER NS POD BUDGET RESERVE: a container whose one process ran and exited
    local out=$t/$1.$2.out sel="uid=\"$1\",container=\"$2\""
    local fake denials
    fake=$(sed -n 's/^fake peak=\([0-9]*\) .*/\1/p' "$out")
    denials=$(sed -n 's/^results=//p' "$out" | tr -cd 1 | wc -c)
    [ -n "$fake" ] || { bad "$2: no fake record in $(cat "$out")"; return; }
    grep -qE "^gpucap_container_used_bytes\{namespace=\"$3\",pod=\"$4\",$sel,UUID=\"GPU-[0-9a-f-]{36}\"\} " "$t/m1" ||
        bad "$2: labels: $(grep "$sel" "$t/m1" | head -1)"
    # The process has exited without freeing: its share stays in the ledger until the container's
    # next process reaps it, but its memory went with its device files, and so did the lock that
    # holds its entry (common/ledger.h), which the exporter asks from any PID namespace: it shows
    # what the card holds (nothing), as `gpucap status` in the container does; the peak stays.
    [ "$(value m1 gpucap_container_used_bytes "$sel")" = 0 ] ||
        bad "$2: used $(value m1 gpucap_container_used_bytes "$sel") after its process exited (the card holds none)"
    [ "$(value m1 gpucap_container_peak_bytes "$sel")" = $((fake + $6)) ] || bad "$2: peak"
    [ "$(value m1 gpucap_container_context_reserve_bytes "$sel")" = 0 ] || bad "$2: context reserve after exit"
    [ "$(value m1 gpucap_container_budget_bytes "$sel")" = "$5" ] || bad "$2: budget"
    [ "$(value m1 gpucap_container_denials_total "$sel")" = "$denials" ] ||
        bad "$2: denials $(value m1 gpucap_container_denials_total "$sel"), the process saw $denials"
}
check_ctr $uid_a main team-a train-0 $((64 * MiB)) 0
check_ctr $uid_b srv team-b infer-0 $((960 * MiB)) $((8 * MiB))
# What the exporter counts for processes that are gone is what `gpucap status` counts in the
# container (issue 31): the same holders (an entry's lock), whichever PID namespace asks.
if [ -n "${TEST_CLI:-}" ]; then
    for c in "$uid_a main" "$uid_a side" "$uid_b srv"; do
        set -- $c
        st=$("$TEST_CLI" status --json --ledger "$(ldir $1 $2)/gpucap.ledger" |
             python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["in_use"])')
        [ "$st" = "$(value m1 gpucap_container_used_bytes "uid=\"$1\",container=\"$2\"")" ] ||
            bad "$2: status says $st in use, the exporter $(value m1 gpucap_container_used_bytes "container=\"$2\"")"
    done
fi
grep -q '^fake peak=41943040 ' "$t/$uid_a.main.out" || bad "main: unexpected fake record $(cat "$t/$uid_a.main.out")"
[ "$(value m1 gpucap_container_processes 'container="side"')" = 1 ] || bad "side: live process count"
[ "$(value m1 gpucap_container_used_bytes 'container="side"')" = $((8 * MiB)) ] || bad "side: used"
[ "$(value m1 gpucap_container_processes 'container="main"')" = 0 ] || bad "main: an exited process counted"
# As `gpucap status` counts the same ledgers (inside their containers: here, the same PID namespace).
if [ -n "${TEST_CLI:-}" ]; then
    for c in "$uid_a main" "$uid_a side" "$uid_b srv"; do
        set -- $c
        "$TEST_CLI" status --json --ledger "$(ldir "$1" "$2")/gpucap.ledger" > "$t/st.json" 2> /dev/null ||
            bad "status of $2"
        want=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d["devices"][0]
print(v["in_use"], v["contexts"], d["live_processes"])' "$t/st.json")
        sel="uid=\"$1\",container=\"$2\""
        got="$(value m1 gpucap_container_used_bytes "$sel") $(value m1 gpucap_container_context_reserve_bytes "$sel") $(value m1 gpucap_container_processes "$sel")"
        [ "$got" = "$want" ] || bad "$2: the exporter says in use, reserve, processes $got; gpucap status $want"
    done
fi
[ "$(value m1 gpucap_container_budget_bytes 'container="side"')" = $((32 * MiB)) ] || bad "side: budget"
[ "$(value m1 gpucap_gpu_budgets_bytes '')" = $((1056 * MiB)) ] || bad "card budgets: $(value m1 gpucap_gpu_budgets_bytes '')"
# A budget changed live (gpucap set-memory on main's ledger, whose process has exited): pending
# until a process of the container applies it (no second writer of the limit), then from, to, when,
# how many times; nothing above it. Never changed: no previous/timestamp series.
[ -z "$(value m1 gpucap_container_budget_previous_bytes 'container="main"')" ] || bad "main: a previous budget before any change"
[ "$(value m1 gpucap_container_budget_changes_total 'container="main"')" = 0 ] || bad "main: changes before any"
main_budget=64
if [ -n "${TEST_CLI:-}" ]; then
    main_budget=16
    before=$(date +%s)
    "$TEST_CLI" set-memory --ledger "$(ldir $uid_a main)/gpucap.ledger" 16MiB > /dev/null || bad "set-memory on main"
    scrape m1p
    [ "$(value m1p gpucap_container_budget_bytes 'container="main"')" = $((64 * MiB)) ] || bad "main: budget while pending"
    [ "$(value m1p gpucap_container_budget_pending_bytes 'container="main"')" = $((16 * MiB)) ] || bad "main: pending"
    [ -z "$(value m1p gpucap_container_budget_pending_bytes 'container="side"')" ] || bad "side: pending"
    # The container's next process applies it before its first allocation.
    run team-a train-0 $uid_a main 64MiB 0 a8 || bad "main's second process did not run"
    grep -q "results=0$" "$t/$uid_a.main.out" || bad "main's second process: $(cat "$t/$uid_a.main.out")"
    scrape m1b
    [ -z "$(value m1b gpucap_container_budget_pending_bytes 'container="main"')" ] || bad "main: still pending"
    promtool check metrics < "$t/m1b" > "$t/lint" 2>&1 && [ ! -s "$t/lint" ] || bad "promtool after a change: $(cat "$t/lint")"
    [ "$(value m1b gpucap_container_budget_bytes 'container="main"')" = $((16 * MiB)) ] || bad "main: budget after the change"
    [ "$(value m1b gpucap_container_budget_previous_bytes 'container="main"')" = $((64 * MiB)) ] || bad "main: previous budget"
    [ "$(value m1b gpucap_container_budget_changes_total 'container="main"')" = 1 ] || bad "main: changes"
    at=$(value m1b gpucap_container_budget_changed_timestamp_seconds 'container="main"')
    [ -n "$at" ] && [ "$at" -ge "$before" ] && [ "$at" -le "$(date +%s)" ] || bad "main: changed at '$at'"
    # The process that applied it reaped the first one's 40 MiB first: nothing is above the budget.
    [ "$(value m1b gpucap_container_above_budget 'container="main"')" = 0 ] || bad "main: above its budget"
    [ "$(value m1b gpucap_container_above_budget 'container="side"')" = 0 ] || bad "side: above its budget"
fi
# A process killed while it holds memory (SIGKILL: no destructor runs) is gone at the next scrape:
# its use, its context reserve and its entry, all of which it showed while it ran.
pid_k=
mkdir -p "$(ldir $uid_a kill)"
GPUCAP_LEDGER=$(ldir $uid_a kill)/gpucap.ledger GPUCAP_MEMORY_LIMIT=64MiB GPUCAP_CONTEXT_RESERVE=4MiB \
    GPUCAP_POD_NAMESPACE=team-a GPUCAP_POD_NAME=train-0 GPUCAP_POD_UID=$uid_a GPUCAP_CONTAINER_NAME=kill \
    LD_PRELOAD=$TEST_PRELOAD "$alloc" a12 s6000 > /dev/null 2>&1 &
pid_k=$!
waitfor scraped mk gpucap_container_used_bytes 'container="kill"' $((16 * MiB))
[ "$(value mk gpucap_container_used_bytes 'container="kill"')" = $((16 * MiB)) ] &&
    [ "$(value mk gpucap_container_context_reserve_bytes 'container="kill"')" = $((4 * MiB)) ] &&
    [ "$(value mk gpucap_container_processes 'container="kill"')" = 1 ] ||
    bad "kill: while it runs: $(grep 'container="kill"' "$t/mk" | grep -E 'used|reserve|processes')"
kill -KILL $pid_k
wait $pid_k 2> /dev/null
scrape mk
[ "$(value mk gpucap_container_used_bytes 'container="kill"')" = 0 ] &&
    [ "$(value mk gpucap_container_context_reserve_bytes 'container="kill"')" = 0 ] &&
    [ "$(value mk gpucap_container_processes 'container="kill"')" = 0 ] &&
    [ "$(value mk gpucap_container_peak_bytes 'container="kill"')" = $((16 * MiB)) ] ||
    bad "kill: after SIGKILL: $(grep 'container="kill"' "$t/mk" | grep -E 'used|reserve|processes|peak')"
rm -rf "$(ldir $uid_a kill)"
# The same from another PID namespace, as a container's processes are to the exporter: the pid in the
# ledger (1 there) names another process here, or none; the lock says what holds.
if unshare -p -f true 2> /dev/null; then
    mkdir -p "$(ldir $uid_a ns)"
    GPUCAP_LEDGER=$(ldir $uid_a ns)/gpucap.ledger GPUCAP_MEMORY_LIMIT=64MiB \
        GPUCAP_POD_NAMESPACE=team-a GPUCAP_POD_NAME=train-0 GPUCAP_POD_UID=$uid_a GPUCAP_CONTAINER_NAME=ns \
        LD_PRELOAD=$TEST_PRELOAD unshare -p -f "$alloc" a10 s6000 > /dev/null 2>&1 &
    ns_parent=$!
    waitfor scraped mn gpucap_container_used_bytes 'container="ns"' $((10 * MiB))
    [ "$(value mn gpucap_container_processes 'container="ns"')" = 1 ] &&
        [ "$(value mn gpucap_container_used_bytes 'container="ns"')" = $((10 * MiB)) ] ||
        bad "ns: a live process of another PID namespace: $(grep 'container="ns"' "$t/mn" | grep -E 'used|processes')"
    ns_child=$(ps -o pid= --ppid $ns_parent | tr -d ' ')
    [ -n "$ns_child" ] && kill -KILL $ns_child
    wait $ns_parent 2> /dev/null
    scrape mn
    [ "$(value mn gpucap_container_processes 'container="ns"')" = 0 ] &&
        [ "$(value mn gpucap_container_used_bytes 'container="ns"')" = 0 ] ||
        bad "ns: killed in another PID namespace: $(grep 'container="ns"' "$t/mn" | grep -E 'used|processes')"
    rm -rf "$(ldir $uid_a ns)"
else
    echo "note: no PID namespace here (unshare -p): the other-namespace case not run"
fi
[ "$(value m1 gpucap_gpu_memory_bytes '')" = $((1024 * MiB)) ] || bad "card size"
[ "$(value m1 gpucap_gpu_containers '')" = 3 ] || bad "card containers"
grep -qE '^gpucap_container_info\{namespace="team-b",pod="infer-0",uid="'$uid_b'",container="srv",mode="enforce",gpucap_version="[0-9.]+"\} 1$' \
    "$t/m1" || bad "info series"
grep -q '^gpucap_exporter_ledgers 3$' "$t/m1" || bad "ledgers read: $(grep '^gpucap_exporter_ledgers ' "$t/m1")"

# Scrapes while two processes of one container allocate and free: every scrape reads the ledger
# whole (no skip), and never shows more in use than the budget. The scrape takes no lock, so
# nothing here waits on the other.
churn_ops=()
for _ in $(seq 20); do churn_ops+=(a3 a2 s1 F a5 F); done
for _ in 1 2; do
    run team-a train-0 $uid_a churn 8MiB 0 "${churn_ops[@]}" &
    churners+=($!)
done
n=0
while kill -0 "${churners[@]}" 2> /dev/null && [ $n -lt 200 ]; do
    scrape mc
    n=$((n + 1))
    grep -q 'gpucap_exporter_ledgers_skipped{reason="[a-z_]*"} [1-9]' "$t/mc" && { bad "skips during churn: $(grep 'skipped{' "$t/mc" | grep -v ' 0$')"; break; }
    used=$(value mc gpucap_container_used_bytes 'container="churn"')
    [ -n "$used" ] && [ "$used" -gt $((8 * MiB)) ] && { bad "churn: $used in use over an 8 MiB budget"; break; }
done
wait "${churners[@]}" || bad "a churning process failed"
echo "scrapes during churn: $n"
rm -rf "$(ldir $uid_a churn)"

# Bad files, one per reason, in pod X (and one good ledger copied under pod X: it names pod A).
good=$(ldir $uid_a main)/gpucap.ledger
size=$(stat -c %s "$good")
mk() { mkdir -p "$(ldir $uid_x "$1")"; echo "$(ldir $uid_x "$1")/gpucap.ledger"; }
head -c 4096 "$good" > "$(mk truncated)"
head -c 200000 /dev/urandom > "$(mk random)"
f=$(mk magic) && cp "$good" "$f" && printf 'X' | dd of="$f" bs=1 seek=0 conv=notrunc 2> /dev/null
f=$(mk version) && cp "$good" "$f" && printf '\x63\x00\x00\x00' | dd of="$f" bs=1 seek=8 conv=notrunc 2> /dev/null
truncate -s 100G "$(mk huge)"
ln -s "$good" "$(mk link)"
mkdir "$(mk dir)"
mkfifo "$(mk fifo)"
ln -s "$(ldir $uid_a main)" "$(ldir $uid_x linkdir)"
touch "$(ldir $uid_x notadir)"
cp "$good" "$(mk copied)"
mkdir -p "$(ldir $uid_x 'Bad Name')"
# A torn copy: the identity block's sequence number odd, as while a writer is inside it.
f=$(mk torn) && cp "$good" "$f" && python3 - "$f" "$uid_a" << 'EOF'
import struct, sys
path, uid = sys.argv[1], sys.argv[2].encode()
data = bytearray(open(path, 'rb').read())
# struct gpc_ledger_identity: seq, mode, written_ns, namespace[64], pod[256], then pod_uid.
seq_at = data.find(uid + b'\0') - (4 + 4 + 8 + 64 + 256)
struct.pack_into('<I', data, seq_at, struct.unpack_from('<I', data, seq_at)[0] + 1)
open(path, 'wb').write(data)
EOF
# The same card registered twice (device entry 0 copied over entry 1): no gpucap writes that.
f=$(mk twice) && cp "$good" "$f" && python3 - "$f" "$uid_a" << 'EOF'
import sys
path, uid = sys.argv[1], sys.argv[2].encode()
data = bytearray(open(path, 'rb').read())
# In the identity block, pod_uid[64] and container_name[64] are followed by the version[32], then
# come the device entries (576 bytes each in layout 8: state, closed, uuid, physical, slot, mutex,
# the journal, the driver's limit, the figures, the live changes). The recorded pod UID and container are blanked so the path's apply.
uid_at = data.find(uid + b'\0')
data[uid_at:uid_at + 128] = bytes(128)
dev0 = uid_at + 64 + 64 + 32
assert data[dev0] == 1, "layout changed: update this test"
data[dev0 + 576:dev0 + 1152] = data[dev0:dev0 + 576]
open(path, 'wb').write(data)
EOF
for _ in 1 2; do scrape m2; done # a second scrape: the first one's skips are not carried over
kill -0 $exp 2> /dev/null || bad "the exporter died on bad files"
promtool check metrics < "$t/m2" > "$t/lint" 2>&1 && [ ! -s "$t/lint" ] || bad "promtool on bad files: $(cat "$t/lint")"
declare -A want=([truncated]=1 [bad_magic]=2 [bad_version]=1 [too_large]=1 [symlink]=2 [not_regular]=3 [mismatch]=1
                 [torn]=1 [bad_name]=1 [open_failed]=0 [read_failed]=0 [corrupt]=1 [limit]=0)
for r in "${!want[@]}"; do
    got=$(value m2 gpucap_exporter_ledgers_skipped "reason=\"$r\"")
    [ "$got" = "${want[$r]}" ] || bad "skipped $r: $got, expected ${want[$r]}"
done
grep -q "^gpucap_exporter_ledgers 3$" "$t/m2" || bad "good ledgers beside bad ones: $(grep '^gpucap_exporter_ledgers ' "$t/m2")"
grep -q "$uid_x" "$t/m2" && bad "a series of the bad pod: $(grep "$uid_x" "$t/m2" | head -1)"

# A pod that goes away takes its series with it.
rm -rf "${root:?}/$uid_b"
scrape m3
grep -q "$uid_b" "$t/m3" && bad "pod B still shown: $(grep "$uid_b" "$t/m3" | head -1)"
grep -q "uid=\"$uid_a\",container=\"main\"" "$t/m3" || bad "pod A gone with B"
# main (16 MiB since the change above, else 64) and side (32 MiB).
[ "$(value m3 gpucap_gpu_budgets_bytes '')" = $(((main_budget + 32) * MiB)) ] || bad "card budgets after B left"

# /livez, /readyz (and /healthz), other paths and methods; a root that cannot be read is a scrape
# error and 503 on /readyz, while /livez still answers.
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 200 ] || bad "healthz"
[ "$(curl -s "$url/readyz")" = ok ] || bad "readyz"
[ "$(curl -s "$url/livez")" = ok ] || bad "livez"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/nope")" = 404 ] || bad "404"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/metrics")" = 405 ] || bad "405"
mv "$root" "$root.moved"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 503 ] || bad "healthz without root"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")" = 503 ] || bad "readyz without root"
[ "$(curl -s "$url/livez")" = ok ] || bad "livez without root (the process serves)"
scrape m4
grep -q "^gpucap_exporter_scrape_errors_total 1$" "$t/m4" || bad "scrape error count: $(grep errors_total "$t/m4")"
kill -TERM $exp
wait $exp || bad "exporter exit status $? after SIGTERM"
exit $fail
