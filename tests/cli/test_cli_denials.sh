#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_denials.sh GPUCAP CLI_ALLOC: a request denied and at once asked again (as PyTorch's
# caching allocator does after freeing its cache) is one denial: one warning line, one in the
# report. Asked again after something was admitted, for another size, or more than a second
# later, it is a denial of its own; each process's are its own.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
export FAKECUDA_CTX_BYTES=0 GPUCAP_CONTEXT_RESERVE=0
denials() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['devices'][0]['denials'])" "$t/r.json"; }
# check NAME OPS DENIALS: under a 64 MiB budget, OPS make DENIALS denials and as many warning lines.
check() {
    "$gpucap" run --memory 64MiB --report "$t/r.json" --json -- "$alloc" $2 > "$t/out" 2> "$t/err" ||
        { bad "$1: run failed: $(cat "$t/err")"; return; }
    local lines; lines=$(grep -c 'denied on device' "$t/err")
    [ "$(denials)" = "$3" ] && [ "$lines" = "$3" ] || bad "$1: $(denials) denials and $lines lines, want $3: $(cat "$t/err")"
}
check "asked again at once" "a100 a100" 1
check "asked three times" "a100 a100 a100" 1
check "another size between" "a100 a80 a100" 3
check "an admission between" "a100 a1 a100" 2
check "after a free" "a10 F a100 a100" 1
check "a second later" "a100 s12 a100" 2
check "each process its own" "a100 c:a100" 2
exit $fail
