#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_reserve.sh CLI_ALLOC: the context reserve against small budgets. At a device's set-up, once
# per process, gpucap says when the reserve takes half the budget or more (the default for the
# card class, 256 MiB here, against a 256 MiB budget: nothing is left to allocate); a reserve
# above the budget denies the first context with a line that names the reserve and the setting;
# a reserve under half the budget, or audit mode, says nothing.
set -u
alloc=$1
. "$(dirname "$0")/../common.sh"

# run ENV... -- OPS: cli_alloc OPS under the library; stdout to $t/out, stderr to $t/err.
run() { preloaded "$TEST_PRELOAD" "$alloc" -u GPUCAP_CONTEXT_RESERVE "$@"; }
said() { grep -c "the context reserve, .* takes" "$t/err"; }

# The default reserve of a 1 GiB card (256 MiB) is all of a 256 MiB budget: said once, before the
# denials it explains, even with two devices, three contexts and several allocations.
run GPUCAP_MEMORY_LIMIT=256MiB FAKECUDA_DEVICES=2 FAKECUDA_MEM=1GiB -- a10 d1 a10 c:a10
expect "default reserve, 100%" "gpucap: warning: device 0: the context reserve, 256.00 MiB charged for each context before any allocation, takes 100% of the budget 256.00 MiB; set context_reserve \(GPUCAP_CONTEXT_RESERVE\)" err
[ "$(said)" = 2 ] || bad "said $(said) times for two processes, want once each: $(cat "$t/err")"
[ "$(grep -n 'context reserve, ' "$t/err" | head -1 | cut -d: -f1)" = 1 ] || bad "the notice is not the first line"
expect "nothing left" "results=11$" out

# Half exactly: said, with the figure; the allocations get the other half.
run GPUCAP_MEMORY_LIMIT=256MiB GPUCAP_CONTEXT_RESERVE=128MiB -- a100 a100
expect "half" "takes 50% of the budget 256.00 MiB" err
expect "half: the rest allocatable" "results=01$" out

# Under half: nothing said.
run GPUCAP_MEMORY_LIMIT=256MiB GPUCAP_CONTEXT_RESERVE=127MiB -- a100
[ "$(said)" = 0 ] || bad "said for a reserve under half the budget: $(cat "$t/err")"
expect "under half" "results=0$" out

# Above the budget: the first context is denied, and its line says why and what to set.
run GPUCAP_MEMORY_LIMIT=64MiB GPUCAP_CONTEXT_RESERVE=128MiB -- a1
expect "above: notice" "takes 100% of the budget 64.00 MiB: the first context on it is denied" err
expect "above: the denial names the reserve" "gpucap: warning: cuDevicePrimaryCtxRetain denied on device 0: the context reserve 128.00 MiB does not fit in the budget 64.00 MiB \(in use 0 B\); raise the budget or set context_reserve \(GPUCAP_CONTEXT_RESERVE\) lower -> CUDA_ERROR_OUT_OF_MEMORY" err

# Audit mode denies nothing: nothing to say.
run GPUCAP_MEMORY_LIMIT=64MiB GPUCAP_CONTEXT_RESERVE=128MiB GPUCAP_MODE=audit -- a1
[ "$(said)" = 0 ] || bad "said in audit mode: $(cat "$t/err")"
exit $fail
