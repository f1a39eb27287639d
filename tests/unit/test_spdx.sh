#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_spdx.sh SOURCE_DIR: every source file of ours (C, CUDA, shell, Python, CMake, Kubernetes YAML,
# Dockerfile) names its licence in an SPDX line near its top (LICENSE: Apache-2.0). Vendored
# schemas (tests/webhook/schemas) keep their own headers. Skipped outside a git checkout.
cd "$1" || exit 1
git rev-parse --git-dir > /dev/null 2>&1 || { echo "not a git checkout; skipping"; exit 77; }
missing=0
while read -r f; do
    case "$f" in
        tests/webhook/schemas/*) continue ;;
        *.c|*.h|*.cu|*.sh|*.py|*.cmake|CMakeLists.txt|*.yaml|*.yml|*/Dockerfile|.ci/run) ;;
        *) continue ;;
    esac
    [ -f "$f" ] || continue
    head -3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || { echo "no SPDX line: $f"; missing=$((missing + 1)); }
done < <(git ls-files)
[ "$missing" = 0 ] || { echo "FAIL: $missing files without an SPDX line"; exit 1; }
echo "ok: every source file names its licence"
