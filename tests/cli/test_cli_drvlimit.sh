#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_drvlimit.sh GPUCAP CLI_ALLOC EXPORTER: who enforces, as the tools say it. In a container
# the fake driver limits (FAKECUDA_DRIVER_LIMIT) `gpucap status`, the report of `gpucap run` (text
# and JSON) and gpucap-exporter say "driver + gpucap" with the driver's limit; without it, "gpucap";
# and "gpucap" for a container that only declares NVIDIA_GPU_MEMORY_LIMIT (the card's size, or any).
set -u
gpucap=$1 alloc=$2 exporter=${3:-}
. "$(dirname "$0")/../common.sh"
export FAKECUDA_CTX_BYTES=0 GPUCAP_CONTEXT_RESERVE=0

# status: a ledger written in a limited container (driver 256 MiB, gpucap's own 64 MiB), and one not.
GPUCAP_LEDGER=$t/limited.ledger FAKECUDA_DRIVER_LIMIT=256MiB LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 > /dev/null 2>&1 ||
    bad "limited run"
GPUCAP_LEDGER=$t/plain.ledger LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 > /dev/null 2>&1 || bad "plain run"
"$gpucap" status --ledger "$t/limited.ledger" > "$t/out" || bad "status: $(cat "$t/out")"
grep -qx "  enforced by: driver + gpucap (the driver's limit 256.00 MiB)" "$t/out" || bad "status limited: $(cat "$t/out")"
grep -qE "^device GPU-.*  budget 64.00 MiB " "$t/out" || bad "status budget: $(cat "$t/out")"
"$gpucap" status --ledger "$t/plain.ledger" > "$t/out" || bad "status plain"
grep -qx "  enforced by: gpucap" "$t/out" || bad "status plain: $(cat "$t/out")"
"$gpucap" status --json --ledger "$t/limited.ledger" > "$t/j"
python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))['devices'][0]
assert d['enforced_by']=='driver + gpucap' and d['driver_limit']==256<<20 and d['budget']==64<<20, d
" "$t/j" || bad "status json limited: $(cat "$t/j")"
"$gpucap" status --json --ledger "$t/plain.ledger" > "$t/j"
python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))['devices'][0]
assert d['enforced_by']=='gpucap' and d['driver_limit'] is None, d
" "$t/j" || bad "status json plain: $(cat "$t/j")"

# A tenant's own declaration is no evidence (issue 30): NVIDIA_GPU_MEMORY_LIMIT equal to the 1 GiB card,
# above it, or below it, with no driver's limit in force, and one the driver reports as the card's
# size too: status, its JSON and the report say gpucap alone enforces (the budget is capped at the
# declaration all the same).
for decl in 1024 2048 512; do
    for drv in "" 1GiB; do
        rm -f "$t/decl.ledger"
        env ${drv:+FAKECUDA_DRIVER_LIMIT=$drv} GPUCAP_LEDGER=$t/decl.ledger NVIDIA_GPU_MEMORY_REQUEST=$decl \
            NVIDIA_GPU_MEMORY_LIMIT=$decl LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 > /dev/null 2>&1 || bad "declared $decl run"
        "$gpucap" status --ledger "$t/decl.ledger" > "$t/out" || bad "status declared $decl"
        grep -qx "  enforced by: gpucap" "$t/out" || bad "declared $decl MiB, driver ${drv:-none}: $(grep enforced "$t/out")"
        "$gpucap" status --json --ledger "$t/decl.ledger" > "$t/j"
        python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))['devices'][0]
assert d['enforced_by']=='gpucap' and d['driver_limit'] is None, d
" "$t/j" || bad "status json declared $decl, driver ${drv:-none}: $(cat "$t/j")"
    done
done
NVIDIA_GPU_MEMORY_REQUEST=1024 NVIDIA_GPU_MEMORY_LIMIT=1024 "$gpucap" run --report "$t/d.txt" -- "$alloc" a8 > /dev/null 2>&1
grep -qE "^  enforced by +gpucap$" "$t/d.txt" || bad "report, declared the card's size: $(grep enforced "$t/d.txt")"
cp "$t/decl.ledger" "$t/declared_card.ledger"

# The report of a run: 50% of the driver's 256 MiB is 128 MiB (not of the 1 GiB card); 100 MiB fits,
# 40 more is denied by gpucap.
FAKECUDA_DRIVER_LIMIT=256MiB "$gpucap" run --memory 50% --report "$t/r.txt" -- "$alloc" a100 a40 > /dev/null 2>&1
grep -qE "^  enforced by +driver \+ gpucap \(the driver's limit 256.00 MiB\)$" "$t/r.txt" || bad "report text: $(cat "$t/r.txt")"
grep -q "budget 128.00 MiB of 1.00 GiB" "$t/r.txt" || bad "report budget: $(cat "$t/r.txt")"
grep -qE "^  denials +1$" "$t/r.txt" || bad "report denials: $(cat "$t/r.txt")"
FAKECUDA_DRIVER_LIMIT=256MiB "$gpucap" run --memory 50% --report "$t/r.json" --json -- "$alloc" a8 > /dev/null 2>&1
python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))['devices'][0]
assert d['enforced_by']=='driver + gpucap' and d['driver_limit']==256<<20 and d['budget']==128<<20, d
" "$t/r.json" || bad "report json: $(cat "$t/r.json")"
"$gpucap" run --memory 50% --report "$t/p.txt" -- "$alloc" a8 > /dev/null 2>&1
grep -qE "^  enforced by +gpucap$" "$t/p.txt" || bad "report plain: $(cat "$t/p.txt")"
grep -q "budget 512.00 MiB of 1.00 GiB" "$t/p.txt" || bad "report plain budget: $(cat "$t/p.txt")"

# The driver refuses what gpucap admitted: a process of the same container that gpucap does not see
# (no preload) holds 200 MiB of the driver's 256; gpucap (512 MiB of its own) admits 100 MiB, the
# driver says out-of-memory, the program gets it unchanged and gpucap charges nothing for it.
FAKECUDA_RECORD=$t/record FAKECUDA_DRIVER_LIMIT=256MiB "$alloc" a200 s30 > /dev/null 2>&1 &
hidden=$!
sleep 0.5
FAKECUDA_RECORD=$t/record FAKECUDA_DRIVER_LIMIT=256MiB GPUCAP_MEMORY_LIMIT=512MiB GPUCAP_LEDGER=$t/both.ledger \
    LD_PRELOAD=$TEST_PRELOAD "$alloc" a100 a40 > "$t/out" 2>&1
wait $hidden
grep -q "^results=10$" "$t/out" || bad "driver refusal: $(cat "$t/out")"
"$gpucap" status --json --ledger "$t/both.ledger" > "$t/j"
python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))['devices'][0]
assert d['denials']==0 and d['budget']==256<<20 and d['enforced_by']=='driver + gpucap', d
" "$t/j" || bad "driver refusal, gpucap's figures: $(cat "$t/j")"

# The exporter: one container of each kind under a kubelet-like root.
if [ -n "$exporter" ] && command -v curl > /dev/null; then
    root=$t/pods
    ldir() { echo "$root/$1/volumes/kubernetes.io~empty-dir/gpucap-ledger/$2"; }
    uid_a=0a0a0a0a-1111-4222-8333-000000000001 uid_b=0b0b0b0b-1111-4222-8333-000000000002
    uid_c=0c0c0c0c-1111-4222-8333-000000000003
    mkdir -p "$(ldir $uid_a main)" "$(ldir $uid_b main)" "$(ldir $uid_c main)"
    cp "$t/limited.ledger" "$(ldir $uid_a main)/gpucap.ledger"
    cp "$t/plain.ledger" "$(ldir $uid_b main)/gpucap.ledger"
    cp "$t/declared_card.ledger" "$(ldir $uid_c main)/gpucap.ledger"
    "$exporter" --listen 127.0.0.1:0 --root "$root" 2> "$t/log" &
    exp=$!
    port=$(listen_port "$t/log" $exp)
    curl -sf "http://127.0.0.1:$port/metrics" > "$t/m" || bad "scrape: $(cat "$t/log")"
    kill $exp; wait $exp 2> /dev/null
    # The ledgers were written outside a pod: the identity labels are empty; the directory tells them apart.
    grep -qE '^gpucap_container_enforcement_info\{.*enforced_by="driver \+ gpucap"\} 1$' "$t/m" ||
        bad "exporter limited: $(grep enforce "$t/m")"
    grep -qE '^gpucap_container_enforcement_info\{.*enforced_by="gpucap"\} 1$' "$t/m" ||
        bad "exporter plain: $(grep enforce "$t/m")"
    grep -qE '^gpucap_container_enforcement_info\{.*uid="'$uid_c'".*enforced_by="gpucap"\} 1$' "$t/m" ||
        bad "exporter, declared the card's size: $(grep enforce "$t/m")"
    [ "$(grep -cE "^gpucap_container_driver_limit_bytes\{.*\} $((256 * MiB))$" "$t/m")" = 1 ] ||
        bad "exporter driver limit: $(grep driver_limit "$t/m")"
    if command -v promtool > /dev/null; then
        promtool check metrics < "$t/m" > "$t/lint" 2>&1 || bad "promtool: $(cat "$t/lint")"
    fi
fi
exit $fail
