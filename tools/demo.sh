#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tools/demo.sh [BUILD]: the main job. Runs examples/oom-demo under a 1 GiB gpucap budget: on the
# real driver when this machine has an NVIDIA GPU, else on the fake driver the tests build.
set -euo pipefail
build=${1:-build}
lib=$build/lib/libgpucap.so
if [ -e /dev/nvidiactl ] && grep -q 'libcuda.so.1 ' <<< "$(ldconfig -p)"; then
    echo "demo: NVIDIA driver found: running on the real GPU"
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
else
    echo "demo: no GPU or driver here: running on the fake driver (16 GiB fake card) from $build/fake"
    export LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=16GiB
fi
export GPUCAP_LEDGER=$(mktemp -u /tmp/gpucap-demo-XXXXXX.ledger)
trap 'rm -f "$GPUCAP_LEDGER"' EXIT
echo "demo: GPUCAP_MEMORY_LIMIT=1GiB LD_PRELOAD=$lib $build/examples/oom-demo"
echo "demo: (the CUDA context itself is charged a reserve, GPUCAP_CONTEXT_RESERVE: 256 MiB on this card class)"
GPUCAP_MEMORY_LIMIT=1GiB LD_PRELOAD=$lib "$build/examples/oom-demo"
