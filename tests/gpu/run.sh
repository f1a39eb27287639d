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
# The context reserve gpucap charges on this card (hooks/ctx.c's defaults), for the card-side check.
if [ "$card_mib" -ge $((60 * 1024)) ]; then ctx_mib=768; elif [ "$card_mib" -ge $((22 * 1024)) ]; then ctx_mib=384; else ctx_mib=256; fi

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

    # The card's own figure for the process, while it holds half of what two contexts leave
    # (HOLD_CHUNKS chunks), so that a second process on the ledger has room for the other half.
    HOLD_CHUNKS=$(((BUDGET / MiB - 2 * ctx_mib) / CHUNK_MIB / 2))
    card_before=$(nvidia-smi -i "$uuid" --query-gpu=memory.used --format=csv,noheader,nounits | tr -d ' ')
    run_capped card T 90 "$cudart" $CHUNK_MIB hold $HOLD_CHUNKS > "$work/hold.out" 2>&1 &
    wrapper=$!
    for _ in $(seq 100); do grep -q holding "$work/hold.out" && break; sleep 0.2; done
    holder=$(sed -n 's/^holding pid=\([0-9]*\).*/\1/p' "$work/hold.out")
    a1=$(field allocated "$(cat "$work/hold.out")")
    card_during=$(nvidia-smi -i "$uuid" --query-gpu=memory.used --format=csv,noheader,nounits | tr -d ' ')
    used=$([ -n "$holder" ] && proc_mib "$holder")
    if [ -z "$used" ]; then
        skip card.nvml "nvidia-smi lists no per-process figure for pid ${holder:-?} here (container PID namespace?)"
    elif [ "$used" -le $((BUDGET / MiB + ctx_mib)) ]; then
        pass card.nvml "NVML outside the library: the process holds $used MiB (allocated $((${a1:-0} / MiB)) MiB) <= budget $((BUDGET / MiB)) + context $ctx_mib MiB"
    else
        fail card.nvml "NVML outside the library: $used MiB > budget $((BUDGET / MiB)) + context $ctx_mib MiB"
    fi
    # The card as a whole: what it holds more than before the holder started.
    if [ -n "$card_before" ] && [ -n "$card_during" ]; then
        grown=$((card_during - card_before))
        [ "$grown" -ge $((${a1:-0} / MiB)) ] && [ "$grown" -le $((${a1:-0} / MiB + ctx_mib)) ] &&
            pass card.used "the card's memory.used grew by $grown MiB for $((${a1:-0} / MiB)) MiB allocated (context charged $ctx_mib MiB)" ||
            fail card.used "the card's memory.used grew by $grown MiB for $((${a1:-0} / MiB)) MiB allocated, context charged $ctx_mib MiB"
    fi

    # Two processes on one ledger: the second gets only what the first left (its own context counts).
    out=$(GPUCAP_LEDGER=$work/card.ledger LD_PRELOAD=$lib GPUCAP_MEMORY_LIMIT=$BUDGET T 60 "$cudart" $CHUNK_MIB 2>&1)
    a2=$(field allocated "$out")
    if [ -n "$a1" ] && [ -n "$a2" ] && [ $((a1 + a2 + 2 * ctx_mib * MiB)) -le $BUDGET ] &&
       [ $((a1 + a2 + 2 * ctx_mib * MiB)) -ge $((BUDGET - CHUNK_MIB * MiB)) ]; then
        pass ledger.shared "first holds $((a1 / MiB)) MiB, second got $((a2 / MiB)) MiB: with two contexts of $ctx_mib MiB, $(((a1 + a2) / MiB + 2 * ctx_mib)) <= $((BUDGET / MiB))"
    else
        fail ledger.shared "first ${a1:-?}, second ${a2:-?} bytes, contexts 2 x $ctx_mib MiB, budget $BUDGET: $out"
    fi
    # A SIGKILLed process's share comes back.
    [ -n "$holder" ] && kill -9 "$holder"; wait "$wrapper" 2>/dev/null
    out=$(GPUCAP_LEDGER=$work/card.ledger LD_PRELOAD=$lib GPUCAP_MEMORY_LIMIT=$BUDGET T 60 "$cudart" $CHUNK_MIB 2>&1)
    a3=$(field allocated "$out")
    if [ -n "$a3" ] && [ "$a3" -ge $((BUDGET - (ctx_mib + 2 * CHUNK_MIB) * MiB)) ]; then
        pass ledger.sigkill "after the holder was killed: $((a3 / MiB)) MiB allocatable again"
    else
        fail ledger.sigkill "after the kill only ${a3:-?} bytes: $out"
    fi
fi

# ---- what a context really takes on this card, against the reserve gpucap charges for it ----
if [ -n "$cudart" ]; then
    before=$(nvidia-smi -i "$uuid" --query-gpu=memory.used --format=csv,noheader,nounits | tr -d ' ')
    run_capped ctx T 60 "$cudart" $CHUNK_MIB hold 0 > "$work/ctx.out" 2>&1 &
    wrapper=$!
    for _ in $(seq 100); do grep -q holding "$work/ctx.out" && break; sleep 0.2; done
    pid=$(sed -n 's/^holding pid=\([0-9]*\).*/\1/p' "$work/ctx.out")
    during=$(nvidia-smi -i "$uuid" --query-gpu=memory.used --format=csv,noheader,nounits | tr -d ' ')
    own=$([ -n "$pid" ] && proc_mib "$pid")
    [ -n "$pid" ] && kill -9 "$pid"; wait "$wrapper" 2>/dev/null
    grown=$((during - before))
    if [ "$grown" -le "$ctx_mib" ] && [ "${own:-0}" -le "$ctx_mib" ]; then
        pass ctx.footprint "a CUDA runtime context holds ${own:-?} MiB (NVML, per process), the card grew by $grown MiB: within the $ctx_mib MiB reserve"
    else
        fail ctx.footprint "a CUDA runtime context holds ${own:-?} MiB (NVML, per process), the card grew by $grown MiB: more than the $ctx_mib MiB reserve"
    fi
fi

# ---- a reserve below the real context: what the card holds beyond it is measured and charged ----
if [ -n "$cudart" ]; then
    GPUCAP_CONTEXT_RESERVE=128MiB run_capped meas T 60 "$cudart" $CHUNK_MIB hold > "$work/meas.out" 2>&1 &
    wrapper=$!
    for _ in $(seq 100); do grep -q holding "$work/meas.out" && break; sleep 0.2; done
    pid=$(sed -n 's/^holding pid=\([0-9]*\).*/\1/p' "$work/meas.out")
    own=$([ -n "$pid" ] && proc_mib "$pid")
    got=$(field allocated "$(cat "$work/meas.out")")
    [ -n "$pid" ] && kill -9 "$pid"; wait "$wrapper" 2>/dev/null
    if [ -z "$own" ]; then
        skip ctx.measured "nvidia-smi lists no per-process figure here"
    elif [ "$own" -le $((BUDGET / MiB)) ]; then
        pass ctx.measured "reserve 128 MiB, context really ~$((own - ${got:-0} / MiB)) MiB: allocated $((${got:-0} / MiB)) MiB, the card holds $own MiB <= budget $((BUDGET / MiB)) MiB"
    else
        fail ctx.measured "reserve 128 MiB: allocated $((${got:-0} / MiB)) MiB, the card holds $own MiB > budget $((BUDGET / MiB)) MiB"
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
         torch.sigkill torch.train torch.train_oom torch.kernels torch.audit torch.denials torch.exit torch.held; do
    client $c torch
done
for c in cupy.default cupy.async cupy.pinned cupy.kernel; do client $c cupy; done
for c in jax.prealloc jax.jit jax.platform; do client $c jax; done

# ---- this suite's own framework checks (card-side figures, numba) ----
py() { # NAME MODULE LEDGER [ENV=...] -- python code
    local name=$1 mod=$2 l=$3; shift 3
    if ! python3 -c "import $mod" > /dev/null 2>&1; then skip "$name" "$mod is not installed"; return; fi
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    out=$(env "${envs[@]}" LD_PRELOAD=$lib GPUCAP_MEMORY_LIMIT=$BUDGET GPUCAP_LEDGER=$work/$l.ledger \
          timeout -k 5 90 python3 -c "$1" 2>&1)
    local verdict=$(grep -E '^(PASS|FAIL) ' <<< "$out" | tail -1)
    case "$verdict" in
    PASS*) pass "$name" "${verdict#PASS }" ;;
    FAIL*) fail "$name" "${verdict#FAIL }" ;;
    *) fail "$name" "no verdict: $(tail -3 <<< "$out")" ;;
    esac
}
# What the card holds for a PyTorch process at its OOM, cuBLAS loaded, read outside the library.
TORCH_CARD='
import os, subprocess, torch
B = int(os.environ["GPUCAP_MEMORY_LIMIT"])
a = torch.ones((4096, 4096), device="cuda"); (a @ a).sum().item()
held = []
try:
    while len(held) < 100000:
        held.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError:
    pass
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
rows = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                      env=env, capture_output=True, text=True).stdout.split("\n")
mine = [int(r.split(",")[1]) for r in rows if r.strip() and int(r.split(",")[0]) == os.getpid()]
if not mine:
    print("PASS", "no per-process figure here (PID namespace); reserved", torch.cuda.memory_reserved() >> 20, "MiB")
else:
    free, total = torch.cuda.mem_get_info()
    ok = mine[0] <= B >> 20
    print(("PASS" if ok else "FAIL"), f"the card holds {mine[0]} MiB for this process, gpucap counts {(total - free) >> 20} MiB (budget {B >> 20} MiB; torch reserved {torch.cuda.memory_reserved() >> 20} MiB)")
'
py torch.card torch torch3 -- "$TORCH_CARD"
# numba-cuda reaches the driver by dlopen + dlsym (ctypes), not through the runtime.
NUMBA='
import os, numpy as np
from numba import cuda
B = int(os.environ["GPUCAP_MEMORY_LIMIT"])
free, total = cuda.current_context().get_memory_info()
held, n = [], 0
try:
    while n < 100000:
        held.append(cuda.device_array(64 << 20, dtype=np.uint8)); n += 1
except Exception as e:
    err = f"{type(e).__name__}: {e}"
else:
    err = "none"
got = n * (64 << 20)
ok = total == B and 0 < got <= B and "OUT_OF_MEMORY" in err.upper().replace(" ", "_")
print(("PASS" if ok else "FAIL"), f"get_memory_info total={total}; stopped after {got >> 20} MiB of {B >> 20}: {err[:80]}")
'
py numba numba.cuda numba1 -- "$NUMBA"

# ---- gpucap run's report of a PyTorch job that exits holding 1 GiB (normally, then by os._exit) ----
if [ -n "$cli" ] && python3 -c "import torch" > /dev/null 2>&1; then
    for how in exit os._exit; do
        code="import torch, os; x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda'); torch.cuda.synchronize()"
        [ $how = os._exit ] && code="$code; os._exit(0)"
        GPUCAP_LIB=$lib T 90 "$cli" run -m $BUDGET --json --report "$work/report.json" -- python3 -c "$code" > /dev/null 2>&1
        r=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["devices"][0]; print(d["peak"] >> 20, d["held_at_exit"] >> 20, d["allocations"], d["frees"], d["context_reserves"])' "$work/report.json" 2>&1)
        read -r peak held allocs frees ctxs <<< "$r"
        if [ "${held:-0}" -ge 1024 ] 2>/dev/null && [ "${allocs:-0}" -ge 1 ] 2>/dev/null; then
            pass "report.torch.$how" "peak $peak MiB, held at exit $held MiB, allocations $allocs, frees $frees, context reserves $ctxs"
        else
            fail "report.torch.$how" "report of a job exiting with 1 GiB held: $r"
        fi
    done
fi

# ---- what each framework's context really holds (without gpucap; the figures behind the reserve) ----
if python3 -c "import pynvml" > /dev/null 2>&1; then
    for fw in torch cupy jax; do
        python3 -c "import $fw" > /dev/null 2>&1 || continue
        timeout -k 5 90 python3 "$here/footprint.py" $fw 2>&1 | grep '^footprint' | while read -r l; do say "  $l"; done
    done
fi

# ---- facts behind measured context memory: what one NVML query costs, whether imports count ----
if python3 -c "import pynvml" > /dev/null 2>&1; then
    cost=$(timeout -k 5 30 python3 -c '
import time, pynvml
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
pynvml.nvmlDeviceGetComputeRunningProcesses(h)
n = 2000; t = time.perf_counter()
for _ in range(n): pynvml.nvmlDeviceGetComputeRunningProcesses(h)
print(f"{(time.perf_counter() - t) / n * 1e6:.1f}")' 2>&1 | tail -1)
    say "  nvml: nvmlDeviceGetComputeRunningProcesses takes ${cost} us per call (pynvml, 2000 calls)"
fi
if [ -n "${nvcc:-}" ] && T 120 "$nvcc" -O2 -o "$work/ipc_probe" "$here/ipc_probe.cu" > "$work/nvcc_ipc.log" 2>&1; then
    T 40 "$work/ipc_probe" 1024 > "$work/ipc.out" 2>&1 &
    for _ in $(seq 100); do grep -q imported "$work/ipc.out" && break; sleep 0.2; done
    sleep 0.5
    ipid=$(sed -n 's/^imported pid=\([0-9]*\).*/\1/p' "$work/ipc.out")
    epid=$(sed -n 's/^exported pid=\([0-9]*\).*/\1/p' "$work/ipc.out")
    say "  ipc: exporter holds $([ -n "$epid" ] && proc_mib "$epid") MiB, importer of 1024 MiB holds $([ -n "$ipid" ] && proc_mib "$ipid") MiB (NVML, per process); $(tr '\n' ' ' < "$work/ipc.out")"
    [ -n "$ipid" ] && kill "$ipid" 2>/dev/null
    wait
fi

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
