#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/clients/checks.sh CASE: one real-client check of gpucap: the real CUDA runtime from C,
# CuPy, PyTorch, JAX, each under a budget, on whatever driver is there: the fake one in the ctest
# suite (tests/clients/CMakeLists.txt), a real one in the GPU suite (tests/gpu/run.sh). Prints the
# check's "PASS name: figures" / "FAIL name: why" lines; exit 0 when all passed, 1 when one failed
# (a client that is missing or does not start is a failure: nothing is skipped here), 2 on usage.
# The environment says what to run:
#   GPUCAP_LIB     libgpucap.so (required)          CLI         the gpucap command (audit, report)
#   CUDART_CLIENT  tests/clients/cudart_client.cu, built with nvcc
#   PY_TORCH, PY_CUPY, PY_JAX  the Python with that framework (default python3)
#   BUDGET         bytes (default 1 GiB)            RESERVE     the context reserve, bytes (default 0),
#                                                   passed as GPUCAP_CONTEXT_RESERVE
#   WORK           a scratch directory (default: a fresh one, removed at exit)
set -u
here=$(cd "$(dirname "$0")" && pwd)
case_name=${1:-}
[ -n "$case_name" ] || { echo "usage: $0 CASE" >&2; exit 2; }
: "${GPUCAP_LIB:?GPUCAP_LIB: the libgpucap.so to test}"
MiB=$((1 << 20))
BUDGET=${BUDGET:-$((1 << 30))}
RESERVE=${RESERVE:-0}
PY_TORCH=${PY_TORCH:-python3} PY_CUPY=${PY_CUPY:-python3} PY_JAX=${PY_JAX:-python3}
own_work=
if [ -z "${WORK:-}" ]; then WORK=$(mktemp -d /tmp/gpucap-clients.XXXXXX); own_work=1; fi
trap 'jobs -p | xargs -r kill -9 2>/dev/null; [ -n "$own_work" ] && rm -rf "$WORK"' EXIT
fails=0
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<< "$2" | tail -1; }
# The budget, ledger and reserve are this script's to set (a test harness's are not the case's).
unset GPUCAP_MEMORY_LIMIT GPUCAP_LEDGER GPUCAP_CONTEXT_RESERVE
ledger=$WORK/$case_name.ledger
rm -f "$ledger"
export PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH} GPUCAP_CONFIG=${GPUCAP_CONFIG:-/dev/null} RESERVE
# capped CMD...: CMD under the library with the budget and this case's ledger.
capped() { env LD_PRELOAD="$GPUCAP_LIB" GPUCAP_MEMORY_LIMIT=$BUDGET GPUCAP_CONTEXT_RESERVE=$RESERVE \
               GPUCAP_LEDGER="$ledger" "$@"; }
# verdicts OUTPUT: the PASS/FAIL lines of a client's output, counted; none at all is a failure.
verdicts() {
    local n=0 line
    while IFS= read -r line; do
        case "$line" in
        PASS\ *) echo "$line"; n=$((n + 1)) ;;
        FAIL\ *) echo "$line"; n=$((n + 1)); fails=$((fails + 1)) ;;
        esac
    done <<< "$1"
    [ $n -gt 0 ] || fail "$case_name" "no verdict from the client: $(tail -5 <<< "$1")"
}
need_cudart() { [ -x "${CUDART_CLIENT:-}" ] || { fail "$case_name" "CUDART_CLIENT (cudart_client built with nvcc) is missing"; exit 1; }; }
py_of() { case $1 in torch) echo "$PY_TORCH" ;; cupy) echo "$PY_CUPY" ;; jax) echo "$PY_JAX" ;; esac; }
need_py() { # need_py FRAMEWORK: the framework imports in its Python, or the case fails
    local py; py=$(py_of "$1")
    "$py" -c "import $1" > "$WORK/import.log" 2>&1 ||
        { fail "$case_name" "$1 does not import in $py (run tools/setup.sh): $(tail -1 "$WORK/import.log")"; exit 1; }
}
run_py() { # run_py FRAMEWORK ARGS...: FRAMEWORK_checks.py under the budget, its verdicts
    local fw=$1; shift
    need_py "$fw"
    verdicts "$(capped timeout -k 5 240 "$(py_of "$fw")" "$here/${fw}_checks.py" "$@" 2>&1)"
}
# report_field FILE KEY: device 0's KEY in a JSON report of gpucap run.
report_field() { "$PY_TORCH" -c 'import json,sys; print(json.load(open(sys.argv[1]))["devices"][0][sys.argv[2]])' "$1" "$2" 2>/dev/null; }
need_cli() { [ -x "${CLI:-}" ] || { fail "$case_name" "CLI (the gpucap command) is missing"; exit 1; }; }
waitfor() { for _ in $(seq 300); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

case $case_name in
cudart.loop)
    need_cudart
    out=$(capped timeout -k 5 60 "$CUDART_CLIENT" 64 2>&1)
    alloc=$(field allocated "$out"); total=$(field info_total "$out"); err=$(field err "$out")
    if [ "$err" = cudaErrorMemoryAllocation ] && [ "${alloc:-0}" -le "$BUDGET" ] &&
       [ "${alloc:-0}" -ge $((BUDGET - RESERVE - 2 * 64 * MiB)) ]; then
        pass cudart.loop "cudaMalloc stopped at $((alloc / MiB)) MiB of $((BUDGET / MiB)) with $err"
    else
        fail cudart.loop "$out"
    fi
    [ "$total" = "$BUDGET" ] && pass cudart.loop.meminfo "cudaMemGetInfo total $total" ||
        fail cudart.loop.meminfo "cudaMemGetInfo total ${total:-?}, want $BUDGET"
    ;;
cudart.family | cudart.reset | cudart.ipc)
    need_cudart
    verdicts "$(capped timeout -k 5 120 "$CUDART_CLIENT" "${case_name#cudart.}" 64 2>&1)"
    ;;
cupy.default | cupy.async | cupy.pinned | cupy.kernel)
    run_py cupy "${case_name#cupy.}"
    ;;
torch.oom)
    run_py torch oom torch.oom
    ;;
torch.expandable)
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True run_py torch oom torch.expandable
    ;;
torch.async)
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync run_py torch oom torch.async
    ;;
torch.fraction | torch.empty_cache | torch.props)
    run_py torch "${case_name#torch.}"
    ;;
torch.two_procs | torch.sigkill)
    # One process holds half the budget on the ledger; a second one gets only the rest. Then the
    # holder is SIGKILLed: its share comes back, and a third gets the whole budget again.
    need_py torch
    half=$((BUDGET / MiB / 2))
    # Started directly (no function, no timeout): $! must be the holder itself, env exec'ing Python
    # (it sleeps 120 s at most; the exit trap kills it).
    env LD_PRELOAD="$GPUCAP_LIB" GPUCAP_MEMORY_LIMIT=$BUDGET GPUCAP_CONTEXT_RESERVE=$RESERVE GPUCAP_LEDGER="$ledger" \
        "$PY_TORCH" "$here/torch_checks.py" hold $half > "$WORK/hold.out" 2>&1 &
    holder=$!
    waitfor holding "$WORK/hold.out" || { fail "$case_name" "the holder did not start: $(tail -3 "$WORK/hold.out")"; exit 1; }
    out=$(capped timeout -k 5 120 "$PY_TORCH" "$here/torch_checks.py" fill 2>&1)
    a1=$(sed -n 's/^holding \([0-9]*\).*/\1/p' "$WORK/hold.out"); a2=$(field allocated "$out")
    if [ "$case_name" = torch.two_procs ]; then
        if [ -n "$a2" ] && [ $((a1 + a2)) -le "$BUDGET" ] && [ $((a1 + a2 + 2 * RESERVE + 64 * MiB)) -ge "$BUDGET" ]; then
            pass torch.two_procs "the first holds $((a1 / MiB)) MiB, the second got $((a2 / MiB)) MiB: $(((a1 + a2) / MiB)) of $((BUDGET / MiB))"
        else
            fail torch.two_procs "first $a1, second ${a2:-?} bytes for a budget of $BUDGET: $(tail -2 <<< "$out")"
        fi
    else
        kill -9 $holder; wait $holder 2>/dev/null
        out=$(capped timeout -k 5 120 "$PY_TORCH" "$here/torch_checks.py" fill 2>&1)
        a3=$(field allocated "$out")
        [ -n "$a3" ] && [ $((a3 + RESERVE + 64 * MiB)) -ge "$BUDGET" ] && [ "$a3" -le "$BUDGET" ] &&
            pass torch.sigkill "after the holder was killed, $((a3 / MiB)) MiB of $((BUDGET / MiB)) allocatable again" ||
            fail torch.sigkill "after the kill only ${a3:-?} bytes: $(tail -2 <<< "$out")"
    fi
    ;;
torch.train)
    # A real small training step (Linear, ReLU, cross entropy, AdamW: cuBLAS GEMMs forward and
    # backward) under gpucap run --audit. The report's peak is what the card really held at most
    # (the fake driver's record) plus the context reserve; at least PyTorch's own peak
    # (max_memory_reserved) plus the reserve, as cuBLAS allocates its handles' workspaces itself.
    need_py torch; need_cli
    out=$(GPUCAP_LIB="$GPUCAP_LIB" GPUCAP_CONTEXT_RESERVE=$RESERVE timeout -k 5 200 "$CLI" run -m "$BUDGET" --audit \
          --json --report "$WORK/train.json" -- "$PY_TORCH" "$here/torch_checks.py" train 2>&1)
    verdicts "$out"
    peak_torch=$(field peak_reserved "$out"); card=$(field fake_peak "$out"); peak=$(report_field "$WORK/train.json" peak)
    if [ -z "$peak_torch" ] || ! [ "${peak:-x}" -ge $((peak_torch + RESERVE)) ] 2>/dev/null; then
        fail torch.train.peak "report peak ${peak:-?}, max_memory_reserved ${peak_torch:-?} (+ reserve $RESERVE): $(tail -3 <<< "$out")"
    elif [ -n "$card" ]; then
        [ "$peak" = $((card + RESERVE)) ] &&
            pass torch.train.peak "the audit report's peak $peak = the card's peak by the fake's record $card + the reserve $RESERVE (PyTorch's own $peak_torch)" ||
            fail torch.train.peak "the audit report's peak $peak, the card's peak by the fake's record $card + the reserve $RESERVE"
    else
        pass torch.train.peak "the audit report's peak $peak >= PyTorch's max_memory_reserved $peak_torch + the reserve $RESERVE"
    fi
    ;;
torch.train_oom | torch.kernels)
    run_py torch "${case_name#torch.}"
    ;;
torch.denials)
    # One OOM of PyTorch's is one denial and one warning line, though its allocator frees its cache
    # and asks again before it raises.
    need_py torch; need_cli
    GPUCAP_LIB="$GPUCAP_LIB" GPUCAP_CONTEXT_RESERVE=$RESERVE timeout -k 5 200 "$CLI" run -m "$BUDGET" --json \
        --report "$WORK/denials.json" -- "$PY_TORCH" "$here/torch_checks.py" fill > "$WORK/denials.out" 2>&1
    n=$(report_field "$WORK/denials.json" denials); lines=$(grep -c 'denied on device' "$WORK/denials.out")
    [ "${n:-x}" = 1 ] && [ "$lines" = 1 ] && grep -q "error=OutOfMemoryError" "$WORK/denials.out" &&
        pass torch.denials "one OutOfMemoryError: 1 denial in the report, 1 warning line" ||
        fail torch.denials "one OOM gave ${n:-?} denials and $lines warning lines: $(tail -3 "$WORK/denials.out")"
    ;;
torch.exit)
    # A job that ends with os._exit (no exit handler runs): the report's counts are the driver
    # allocations and frees PyTorch's allocator says it made.
    need_py torch; need_cli
    GPUCAP_LIB="$GPUCAP_LIB" GPUCAP_CONTEXT_RESERVE=$RESERVE timeout -k 5 200 "$CLI" run -m "$BUDGET" --json \
        --report "$WORK/exit.json" -- "$PY_TORCH" "$here/torch_checks.py" exit_now > "$WORK/exit.out" 2>&1
    out=$(cat "$WORK/exit.out")
    want_a=$(field device_allocs "$out"); want_f=$(field device_frees "$out")
    got_a=$(report_field "$WORK/exit.json" allocations); got_f=$(report_field "$WORK/exit.json" frees)
    [ -n "$want_a" ] && [ "$got_a" = "$want_a" ] && [ "$got_f" = "$want_f" ] &&
        pass torch.exit "after os._exit the report counts $got_a allocations and $got_f frees, as PyTorch does" ||
        fail torch.exit "the report counts ${got_a:-?} allocations and ${got_f:-?} frees, PyTorch ${want_a:-?} and ${want_f:-?}: $(tail -2 <<< "$out")"
    ;;
torch.held)
    # A job that exits normally holding memory: the report's "held at exit" is what its allocator
    # held then, though the runtime releases its context (and so all of it) before gpucap's destructor.
    need_py torch; need_cli
    GPUCAP_LIB="$GPUCAP_LIB" GPUCAP_CONTEXT_RESERVE=$RESERVE timeout -k 5 200 "$CLI" run -m "$BUDGET" --json \
        --report "$WORK/held.json" -- "$PY_TORCH" "$here/torch_checks.py" job 512 > "$WORK/held.out" 2>&1
    want=$(field reserved "$(cat "$WORK/held.out")"); got=$(report_field "$WORK/held.json" held_at_exit)
    [ -n "$want" ] && [ "$want" -gt 0 ] && [ "$got" = "$want" ] &&
        pass torch.held "held at exit $((got / MiB)) MiB: what the caching allocator held when the job exited" ||
        fail torch.held "held at exit ${got:-?}, the allocator held ${want:-?}: $(tail -2 "$WORK/held.out")"
    ;;
torch.audit)
    # gpucap run --audit with a budget far too small: the report's "sufficient" budget is what the
    # job needed, and a run enforced at exactly that budget completes.
    need_py torch; need_cli
    GPUCAP_LIB="$GPUCAP_LIB" GPUCAP_CONTEXT_RESERVE=$RESERVE timeout -k 5 200 "$CLI" run -m 64MiB --audit --json \
        --report "$WORK/audit.json" -- "$PY_TORCH" "$here/torch_checks.py" job 512 > "$WORK/audit.out" 2>&1
    enough=$(report_field "$WORK/audit.json" sufficient)
    if ! [ "${enough:-x}" -gt 0 ] 2>/dev/null; then
        fail torch.audit "no sufficient budget in the audit report: $(tail -3 "$WORK/audit.out")"
    else
        GPUCAP_LIB="$GPUCAP_LIB" GPUCAP_CONTEXT_RESERVE=$RESERVE timeout -k 5 200 "$CLI" run -m "$enough" \
            -- "$PY_TORCH" "$here/torch_checks.py" job 512 > "$WORK/again.out" 2>&1
        rc=$?
        [ $rc = 0 ] && grep -q "job done" "$WORK/again.out" &&
            pass torch.audit "audit said $((enough / MiB)) MiB suffices; the job run under it completed" ||
            fail torch.audit "audit said $enough bytes suffice, the run under it exited $rc: $(tail -3 "$WORK/again.out")"
    fi
    ;;
jax.prealloc | jax.jit)
    run_py jax "${case_name#jax.}"
    ;;
jax.platform)
    # No pool: XLA asks the driver for every buffer, so gpucap's budget is what stops it.
    XLA_PYTHON_CLIENT_ALLOCATOR=platform run_py jax platform
    ;;
*)
    echo "checks.sh: no case $case_name" >&2
    exit 2
    ;;
esac
[ $fails = 0 ]
