#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_lock.sh PROBE CLI PLATFORM_FILE: the platform's lock, through the test copy of the library
# (TEST_PRELOAD_LOCK, built with PLATFORM_FILE as its platform path). Each escape a tenant can try
# from the environment is refused with one line, each tightening is honoured, memory_limit_max and
# the scheduler's GPU_MEMORY_LIMIT bound every limit, a locked `memory_limit = 50%` (a KAI fraction
# of 0.5) stops at half of the fake card, and `gpucap check` says what the lock did. The installed
# library must not know the test path.
set -u
probe=$1 cli=$2 plat=$3
. "$(dirname "$0")/../common.sh"
trap 'cleanup; rm -rf "$plat"' EXIT
mkdir -p "$(dirname "$plat")"

# run ENV... -- ARGS: the probe with a clean environment; stdout to $t/out, stderr to $t/err.
run() {
    preloaded "$TEST_PRELOAD_LOCK" "$probe" -i PATH="$PATH" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" FAKECUDA_MEM=1GiB \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" "$@"
}
# mkledger PATH: a ledger as the platform makes it (gpucap inject --ledgers: 0666, whole).
mkledger() {
    rm -rf "$t/mk" && mkdir -p "$t/mk/vol" "$t/mk/led" &&
        "$cli" inject --to "$t/mk/vol" --ledgers "$t/mk/led" c=1GiB > /dev/null &&
        mv "$t/mk/led/c/gpucap.ledger" "$1" || { echo "FAIL gpucap inject made no ledger"; fail=1; }
}
# platform TEXT: the platform file; contexts are not charged unless TEXT says (exact figures). Under
# the lock the library makes no ledger: a locked file without a ledger line gets the platform's one.
platform() {
    local extra=""
    case "$1" in
        *"ledger ="*) ;;
        # Unlocked, the environment could name one, but the default would be the user's own
        # /tmp/gpucap-<uid>.ledger: tests keep to their scratch directory.
        *"lock = false"*) extra="ledger = $t/unlocked.ledger
" ;;
        *"lock = "*) rm -f "$t/platform.ledger"; mkledger "$t/platform.ledger"; extra="ledger = $t/platform.ledger
" ;;
        *) extra="ledger = $t/unlocked.ledger
" ;;
    esac
    printf '[gpucap]\ncontext_reserve = 0\n%s%s' "$1" "$extra" > "$plat"
}
refused() { expect "$1 refused" "gpucap: warning: $1=.* refused: the settings are locked by $plat" err; }

platform "lock = true
memory_limit = 64MiB
ledger = $t/locked.ledger
"
mkledger "$t/locked.ledger"
run -- 0 $((65 * MiB))
expect "locked limit" "^total=$((64 * MiB)) .*alloc=2$" out
run -- 0 1
absent "quiet by default" "." err
run GPUCAP_LOG_LEVEL=info -- 0 1
expect "the lock is one line at info" "^gpucap: settings locked by $plat: the environment may only tighten" err

# Escapes: each one refused, the cap unchanged.
run GPUCAP_MEMORY_LIMIT=100% -- 0 $((65 * MiB))
refused GPUCAP_MEMORY_LIMIT
expect "100% refused: capped" "^total=$((64 * MiB)) .*alloc=2$" out
run GPUCAP_MEMORY_LIMIT_0=1GiB -- 0 $((65 * MiB))
refused GPUCAP_MEMORY_LIMIT_0
expect "per-device raise refused: capped" "alloc=2$" out
run GPUCAP_MEMORY_LIMIT_GPU-fa4ec0da-0000-4000-8000-000000000000=1GiB -- 0 $((65 * MiB))
refused GPUCAP_MEMORY_LIMIT_GPU-fa4ec0da-0000-4000-8000-000000000000
expect "per-UUID raise refused: capped" "alloc=2$" out
run GPUCAP_MODE=audit -- 0 $((65 * MiB))
refused GPUCAP_MODE
expect "audit refused: denied" "alloc=2$" out
run GPUCAP_CONFIG=/dev/null -- 0 $((65 * MiB))
refused GPUCAP_CONFIG
expect "another file refused: capped" "^total=$((64 * MiB)) .*alloc=2$" out
# The locked ledger is the one used: without it every allocation is denied, whatever the variable.
mv "$t/locked.ledger" "$t/kept.ledger"
run GPUCAP_LEDGER=off -- 0 1
refused GPUCAP_LEDGER
expect "ledger off: the locked ledger is used" "ledger $t/locked.ledger: is missing" err
expect "ledger off: no private budget" "alloc=2$" out
run GPUCAP_LEDGER="$t/elsewhere.ledger" -- 0 1
refused GPUCAP_LEDGER
expect "ledger moved: the locked ledger is used" "ledger $t/locked.ledger: is missing" err
[ ! -e "$t/elsewhere.ledger" ] && [ ! -e "$t/locked.ledger" ] || { echo "FAIL ledger moved or made"; fail=1; }
mv "$t/kept.ledger" "$t/locked.ledger"
run GPUCAP_LEDGER_GROUP=1 -- 0 1
refused GPUCAP_LEDGER_GROUP
run GPUCAP_LEDGER_GROUP=false -- 0 1
absent "the same ledger_group, written otherwise" "refused" err
run GPUCAP_LOCK=0 GPUCAP_MEMORY_LIMIT=100% -- 0 $((65 * MiB))
expect "GPUCAP_LOCK is not a variable" "GPUCAP_LOCK: lock is read only from the platform file" err
expect "GPUCAP_LOCK=0: capped" "alloc=2$" out

# The context reserve: only raised.
[ -e "$t/platform.ledger" ] || mkledger "$t/platform.ledger"
printf '[gpucap]\nlock = true\nmemory_limit = 128MiB\ncontext_reserve = 64MiB\nledger = %s\n' "$t/platform.ledger" > "$plat"
run GPUCAP_CONTEXT_RESERVE=0 -- 0 $((100 * MiB))
refused GPUCAP_CONTEXT_RESERVE
expect "a lower context reserve refused" "alloc=2$" out
run GPUCAP_CONTEXT_RESERVE=100MiB -- 0 $((40 * MiB))
expect "a higher context reserve honoured" "alloc=2$" out
printf '[gpucap]\nlock = true\nmemory_limit = 1GiB\nledger = %s\n' "$t/platform.ledger" > "$plat"
run GPUCAP_CONTEXT_RESERVE=0 -- 0 $((800 * MiB))
refused GPUCAP_CONTEXT_RESERVE
expect "unset: the reserve stays at the class default" "alloc=2$" out

# Tightenings: honoured, no warning.
platform "lock = true
memory_limit = 64MiB
"
run GPUCAP_MEMORY_LIMIT=32MiB GPUCAP_MODE=enforce -- 0 $((33 * MiB))
expect "lower limit" "^total=$((32 * MiB)) .*alloc=2$" out
absent "a tightening is not refused" "refused" err
run GPUCAP_MEMORY_LIMIT_MAX=16MiB -- 0 1
expect "lower maximum" "^total=$((16 * MiB)) " out
run GPU_MEMORY_LIMIT=$((8 * MiB)) -- 0 $((9 * MiB))
expect "the scheduler's GPU_MEMORY_LIMIT" "^total=$((8 * MiB)) .*alloc=2$" out
run GPU_MEMORY_LIMIT=$((512 * MiB)) -- 0 $((65 * MiB))
expect "GPU_MEMORY_LIMIT cannot raise" "^total=$((64 * MiB)) .*alloc=2$" out
run GPUCAP_FAIL_AFTER=0 -- 0 1
expect "fault injection" "alloc=2$" out
run GPUCAP_LOG_LEVEL=error GPUCAP_MEMORY_LIMIT=5% -- 0 1
expect "log level, and a percentage below the size" "^total=5368709[0-9] " out
run GPUCAP_MEMORY_LIMIT=50% -- 0 1
expect "a percentage above the size: the size" "^total=$((64 * MiB)) " out
expect "a percentage against a size: said" "applies only on devices where it is below memory_limit = 64MiB" err

# The platform maximum bounds every source; under the lock it cannot be raised.
platform "lock = true
memory_limit_max = 256MiB
"
run -- 0 1
expect "the maximum alone is the limit" "^total=$((256 * MiB)) " out
run GPUCAP_MEMORY_LIMIT_MAX=1GiB GPUCAP_MEMORY_LIMIT=512MiB -- 0 1
refused GPUCAP_MEMORY_LIMIT_MAX
expect "the maximum bounds the environment's limit" "^total=$((256 * MiB)) " out
platform "memory_limit_max = 256MiB
"
run GPUCAP_MEMORY_LIMIT=512MiB -- 0 1
expect "unlocked, the maximum still bounds" "^total=$((256 * MiB)) " out

run GPU_MEMORY_LIMIT=lots -- 0 1
expect "a bad GPU_MEMORY_LIMIT: error" "GPU_MEMORY_LIMIT: gpu_memory_limit = 'lots' is not valid" err
expect "a bad GPU_MEMORY_LIMIT: denied" "alloc=2$" out
run GPU_MEMORY_LIMIT=$((32 * MiB)) -- 0 1
expect "unlocked, GPU_MEMORY_LIMIT bounds too" "^total=$((32 * MiB)) " out

# A KAI fraction of 0.5 becomes memory_limit = 50%: half of the card the pod lands on.
platform "lock = true
memory_limit = 50%
"
run FAKECUDA_MEM=2GiB -- 0 $((1024 * MiB))
expect "50% of a 2 GiB card: 1 GiB fits" "^total=$((1024 * MiB)) .*alloc=0$" out
run FAKECUDA_MEM=2GiB -- 0 $((1025 * MiB))
expect "50% of a 2 GiB card: more is denied" "alloc=2$" out
run FAKECUDA_MEM=8GiB GPU_MEMORY_LIMIT=$((3 * 1024 * MiB)) -- 0 1
expect "50% of 8 GiB, the scheduler's 3 GiB is lower" "^total=$((3 * 1024 * MiB)) " out

# Not locked (lock = false, or a malformed lock that locks): the environment overrides as before.
platform "lock = false
memory_limit = 64MiB
"
run GPUCAP_MEMORY_LIMIT=100% -- 0 $((65 * MiB))
expect "unlocked: the environment overrides" "alloc=0$" out
platform "lock = maybe
memory_limit = 64MiB
"
run GPUCAP_MEMORY_LIMIT=100% -- 0 $((65 * MiB))
expect "a malformed lock locks" "alloc=2$" out

# gpucap check shows the lock and what it refused.
platform "lock = true
memory_limit = 64MiB
"
env -i PATH="$PATH" GPUCAP_MODE=audit GPUCAP_MEMORY_LIMIT=1GiB "$cli" check > "$t/out" 2> "$t/err"
expect "check: locked" "^locked: $plat locks the settings; .*\(2 overrides refused" out
expect "check: the budget that applies" "all devices +64.00 MiB .*from $plat:4" out
expect "check: mode stays" "mode += enforce" out
refused GPUCAP_MODE

# The installed library reads the real platform path only.
grep -q "$plat" "$TEST_LIB" && { echo "FAIL: the installed library knows the test platform path"; fail=1; }
grep -q "/etc/gpucap/gpucap.ini" "$TEST_LIB" || { echo "FAIL: the installed library lacks /etc/gpucap/gpucap.ini"; fail=1; }

[ $fail = 0 ] && echo "lock: all checks passed"
exit $fail
