#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/gpu/run.sh: gpucap against a real NVIDIA driver. Builds the project, then runs each check
# with libgpucap.so preloaded and a 2 GiB budget on one card, printing "PASS name: figures",
# "FAIL name: ..." or "SKIP name: reason" (a tool that is not installed: torch, cupy, jax, nvcc).
# The real-client checks (CUDA runtime, PyTorch, CuPy, JAX) are tests/clients/checks.sh's, the
# same ones the fake-driver suite runs in CI.
# Bounded: each check has a timeout, the whole script stays within about 5 minutes. The log goes to
# $OUT/gpu-suite.log when OUT is set. Exit 1 if any check failed.
#   GPU=<index or UUID>   the card to use (default: nvidia-smi's index 0)
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
work=$(mktemp -d /tmp/gpucap-gpu.XXXXXX)
log=${OUT:+$OUT/gpu-suite.log}
[ -n "$log" ] && mkdir -p "$OUT" && : > "$log"
trap 'jobs -p | xargs -r kill -9 2>/dev/null; rm -rf "$work"' EXIT
MiB=$((1024 * 1024)); GiB=$((1024 * MiB)); BUDGET=$((2 * GiB)); CHUNK_MIB=64
fails=0
say() { echo "$*"; [ -n "$log" ] && echo "$*" >> "$log"; return 0; }
pass() { say "PASS $1: $2"; }
fail() { say "FAIL $1: $2"; fails=$((fails + 1)); }
skip() { say "SKIP $1: $2"; }
T() { timeout -k 5 "$@"; } # T SECONDS command...

say "gpucap GPU suite, $(date -u +%FT%TZ), $(uname -n)"
command -v nvidia-smi > /dev/null || { fail setup "nvidia-smi not found: not a GPU machine"; exit 1; }
gpu=${GPU:-0}
uuid=$(nvidia-smi -i "$gpu" --query-gpu=uuid --format=csv,noheader | head -1 | tr -d ' ')
card_mib=$(nvidia-smi -i "$uuid" --query-gpu=memory.total --format=csv,noheader,nounits | tr -d ' ')
say "card $uuid, $card_mib MiB; budget $((BUDGET / MiB)) MiB; driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i "$uuid")"
# The context reserve gpucap charges on this card (hooks_ctx.c's defaults), for the card-side check.
if [ "$card_mib" -ge $((60 * 1024)) ]; then ctx_mib=512; elif [ "$card_mib" -ge $((22 * 1024)) ]; then ctx_mib=384; else ctx_mib=256; fi

# ---- build (or GPUCAP_LIB: a libgpucap.so built elsewhere, for a node without build dependencies) ----
if [ -n "${GPUCAP_LIB:-}" ] && [ -f "$GPUCAP_LIB" ]; then
    lib=$GPUCAP_LIB
elif ! T 180 cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGPUCAP_WEBHOOK=OFF > "$work/cmake.log" 2>&1 ||
     ! T 180 cmake --build "$work/build" -j"$(nproc)" --target gpucap gpucap-cli > "$work/build.log" 2>&1; then
    fail build "$(tail -5 "$work/cmake.log" "$work/build.log" 2>/dev/null)"
    exit 1
else
    lib=$work/build/lib/libgpucap.so
fi
cli=$work/build/tools/gpucap/gpucap
[ -x "$cli" ] || cli=$(command -v gpucap || true)
pass build "$lib"
export CUDA_VISIBLE_DEVICES=$uuid GPUCAP_CONFIG=/dev/null GPUCAP_LOG_LEVEL=warn
run_capped() { # LEDGER-NAME command...: under the library with the 2 GiB budget
    local l=$1; shift
    LD_PRELOAD=$lib GPUCAP_MEMORY_LIMIT=$BUDGET GPUCAP_LEDGER=$work/$l.ledger "$@"
}
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<< "$2" | tail -1; }
# Per-process figure of the card, read outside the library (NVML via nvidia-smi), in MiB.
proc_mib() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -i "$uuid" |
             awk -F', *' -v p="$1" '$1 == p { print $2 }'; }

# ---- CUDA runtime (the client the fake-driver suite runs too: tests/clients/cudart_client.cu) ----
cudart=$work/cudart_client
if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    T 120 "$nvcc" -O2 -o "$cudart" "$src/tests/clients/cudart_client.cu" > "$work/nvcc.log" 2>&1 || cudart=
else
    cudart=
fi
if [ -z "$cudart" ]; then
    skip cudart "nvcc not available: $(tail -2 "$work/nvcc.log" 2>/dev/null)"
else
    out=$(run_capped rt T 60 "$cudart" $CHUNK_MIB 2>&1)
    alloc=$(field allocated "$out"); total=$(field info_total "$out"); err=$(field err "$out")
    if [ "$err" = cudaErrorMemoryAllocation ] && [ "${alloc:-0}" -le $BUDGET ] &&
       [ "${alloc:-0}" -ge $((BUDGET - (ctx_mib + 2 * CHUNK_MIB) * MiB)) ]; then
        pass cudart.loop "stopped at $((alloc / MiB)) MiB of $((BUDGET / MiB)) with $err"
    else
        fail cudart.loop "$out"
    fi
    [ "$total" = $BUDGET ] && pass cudart.meminfo "cudaMemGetInfo total $total" ||
        fail cudart.meminfo "cudaMemGetInfo total ${total:-?}, want $BUDGET"

    # The card's own figure for the process, while it holds all it could get.
    run_capped card T 90 "$cudart" $CHUNK_MIB hold > "$work/hold.out" 2>&1 &
    holder=$!
    for _ in $(seq 100); do grep -q holding "$work/hold.out" && break; sleep 0.2; done
    used=$(proc_mib "$holder")
    if [ -z "$used" ]; then
        skip card.nvml "nvidia-smi lists no per-process figure here (container PID namespace?)"
    elif [ "$used" -le $((BUDGET / MiB + ctx_mib)) ]; then
        pass card.nvml "NVML outside the library: the process holds $used MiB <= budget $((BUDGET / MiB)) + context $ctx_mib MiB"
    else
        fail card.nvml "NVML outside the library: $used MiB > budget $((BUDGET / MiB)) + context $ctx_mib MiB"
    fi

    # Two processes on one ledger: the second gets only what the first left.
    out=$(GPUCAP_LEDGER=$work/card.ledger LD_PRELOAD=$lib GPUCAP_MEMORY_LIMIT=$BUDGET T 60 "$cudart" $CHUNK_MIB 2>&1)
    a1=$(field allocated "$(cat "$work/hold.out")"); a2=$(field allocated "$out")
    if [ -n "$a1" ] && [ -n "$a2" ] && [ $((a1 + a2)) -le $BUDGET ]; then
        pass ledger.shared "first holds $((a1 / MiB)) MiB, second got $((a2 / MiB)) MiB: $(((a1 + a2) / MiB)) <= $((BUDGET / MiB))"
    else
        fail ledger.shared "first ${a1:-?}, second ${a2:-?} bytes: together above the budget; $out"
    fi
    # A SIGKILLed process's share comes back.
    kill -9 "$holder"; wait "$holder" 2>/dev/null
    out=$(GPUCAP_LEDGER=$work/card.ledger LD_PRELOAD=$lib GPUCAP_MEMORY_LIMIT=$BUDGET T 60 "$cudart" $CHUNK_MIB 2>&1)
    a3=$(field allocated "$out")
    if [ -n "$a3" ] && [ "$a3" -ge $((BUDGET - (ctx_mib + 2 * CHUNK_MIB) * MiB)) ]; then
        pass ledger.sigkill "after the holder was killed: $((a3 / MiB)) MiB allocatable again"
    else
        fail ledger.sigkill "after the kill only ${a3:-?} bytes: $out"
    fi
fi

# ---- nvidia-smi under the library ----
out=$(run_capped smi T 30 nvidia-smi -i "$uuid" --query-gpu=memory.total,memory.used,memory.free \
      --format=csv,noheader,nounits 2>&1 | tail -1)
smi_total=$(cut -d, -f1 <<< "$out" | tr -d ' ')
[ "$smi_total" = $((BUDGET / MiB)) ] && pass nvidia-smi "total/used/free under the library: $out MiB" ||
    fail nvidia-smi "nvidia-smi under the library says '$out', want total $((BUDGET / MiB)) MiB"

# ---- the real-client checks, shared with the fake-driver suite (tests/clients/checks.sh) ----
# Each case prints PASS/FAIL lines with figures; a framework that is not installed here is skipped.
client() { # client CASE [MODULE]
    local c=$1 mod=${2:-}
    if [ -n "$mod" ] && ! python3 -c "import $mod" > /dev/null 2>&1; then skip "$c" "$mod is not installed"; return; fi
    case $c in cudart.*) [ -n "$cudart" ] || { skip "$c" "nvcc not available"; return; } ;; esac
    case $c in torch.train | torch.audit | torch.denials | torch.exit | torch.held) [ -n "$cli" ] || { skip "$c" "no gpucap command here"; return; } ;; esac
    local out line n=0
    out=$(GPUCAP_LIB=$lib CLI=$cli CUDART_CLIENT=$cudart BUDGET=$BUDGET RESERVE=$((ctx_mib * MiB)) WORK=$work \
          T 300 bash "$src/tests/clients/checks.sh" "$c" 2>&1)
    while IFS= read -r line; do
        case "$line" in
        PASS\ *) line=${line#PASS }; pass "${line%%: *}" "${line#*: }"; n=$((n + 1)) ;;
        FAIL\ *) line=${line#FAIL }; fail "${line%%: *}" "${line#*: }"; n=$((n + 1)) ;;
        esac
    done <<< "$out"
    [ $n -gt 0 ] || fail "$c" "no verdict: $(tail -3 <<< "$out")"
}
for c in cudart.family cudart.reset cudart.ipc; do client $c; done
for c in torch.oom torch.expandable torch.async torch.fraction torch.empty_cache torch.props torch.two_procs \
         torch.sigkill torch.train torch.audit torch.denials torch.exit torch.held; do client $c torch; done
for c in cupy.default cupy.async cupy.pinned cupy.kernel; do client $c cupy; done
client jax.prealloc jax

# ---- the driver's own per-container limit (driver r615+ / CUDA 13.4, cgroup v2, the toolkit's hook) ----
# Wherever it runs: gpucap must not take the card for a driver limit (cudaMemGetInfo's total is the
# card's here, and the ledger says "gpucap"). In a container the driver limits: the driver's figures
# as gpucap assumes them (cudaMemGetInfo's total = the limit; totalGlobalMem, printed, is what the
# fake driver keeps as the card's), and both enforcers, gpucap first.
drv_major=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i "$uuid" | cut -d. -f1)
declared=${NVIDIA_GPU_MEMORY_LIMIT:-}
dmem_max=$(grep -s '^nvidia' "/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null | sed 's|^/$||')/dmem.max" |
           awk '$2 != "max" { print $2; exit }')
if [ -n "$cudart" ]; then
    raw=$(CUDA_VISIBLE_DEVICES=$uuid T 60 "$cudart" 1024 2>&1)
    raw_total=$(field info_total "$raw"); raw_prop=$(field prop_total "$raw"); raw_alloc=$(field allocated "$raw")
    say "driver's figures without gpucap: cudaMemGetInfo total ${raw_total:-?}, totalGlobalMem ${raw_prop:-?}, allocated ${raw_alloc:-?}"
fi
if [ -n "$cli" ] && [ -f "$work/rt.ledger" ]; then
    enf=$("$cli" status --ledger "$work/rt.ledger" 2>&1 | sed -n 's/^  enforced by: //p' | head -1)
fi
if [ "${drv_major:-0}" -lt 615 ] || [ ! -f /sys/fs/cgroup/cgroup.controllers ] || { [ -z "$declared" ] && [ -z "$dmem_max" ]; }; then
    why="driver $drv_major"
    [ "${drv_major:-0}" -lt 615 ] && why="$why is older than r615 (the driver's limits need r615 / CUDA 13.4)"
    [ -f /sys/fs/cgroup/cgroup.controllers ] || why="$why; no cgroup v2"
    [ -z "$declared" ] && [ -z "$dmem_max" ] && why="$why; this container is not limited (no NVIDIA_GPU_MEMORY_LIMIT, no dmem.max)"
    skip driver_limit "$why"
    if [ -n "$cudart" ] && [ -n "${raw_total:-}" ]; then
        [ "$raw_total" = "$raw_prop" ] && pass driver_limit.none "cudaMemGetInfo total = totalGlobalMem = $raw_total: no limit to take for one" ||
            fail driver_limit.none "cudaMemGetInfo total $raw_total != totalGlobalMem $raw_prop in an unlimited container"
    fi
    if [ -n "${enf:-}" ]; then
        [ "$enf" = gpucap ] && pass driver_limit.status "the ledger says 'enforced by: gpucap'" ||
            fail driver_limit.status "the ledger says 'enforced by: $enf' where the driver limits nothing"
    fi
elif [ -z "$cudart" ]; then
    skip driver_limit "nvcc not available"
else
    lim=${dmem_max:-$((declared * MiB))}
    # The driver alone: it reports the limit and refuses past it.
    [ "$raw_total" -le "$lim" ] && [ "$raw_alloc" -le "$lim" ] &&
        pass driver_limit.driver "reported $raw_total, stopped at $((raw_alloc / MiB)) MiB under a limit of $((lim / MiB)) MiB (totalGlobalMem $raw_prop)" ||
        fail driver_limit.driver "reported $raw_total, allocated $raw_alloc, limit $lim"
    # gpucap with a budget above the driver's: min(gpucap's, the driver's) applies, gpucap denies first.
    out=$(LD_PRELOAD=$lib GPUCAP_MEMORY_LIMIT=$((lim + GiB)) GPUCAP_LEDGER=$work/drv.ledger T 60 "$cudart" $CHUNK_MIB 2>&1)
    t2=$(field info_total "$out"); a2=$(field allocated "$out")
    enf=$("$cli" status --ledger "$work/drv.ledger" 2>&1 | sed -n 's/^  enforced by: //p' | head -1)
    [ "$t2" -le "$lim" ] && [ "$a2" -le "$lim" ] && [ "${enf%% (*}" = "driver + gpucap" ] &&
        pass driver_limit.both "budget $((t2 / MiB)) MiB, stopped at $((a2 / MiB)) MiB; enforced by: $enf" ||
        fail driver_limit.both "total $t2, allocated $a2, limit $lim, enforced by '$enf'"
    [ -n "$cli" ] && "$cli" doctor 2>&1 | grep -E "driver limit|cgroup|toolkit" | while read -r l; do say "  doctor: $l"; done
fi

say "$(date -u +%FT%TZ): $fails failed"
[ "$fails" = 0 ]
