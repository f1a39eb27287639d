#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tools/setup.sh [build|test]: installs from Debian packages what is missing, and says what it does.
#   build (the default)  what building everything takes: README command 1
#   test                 that, and what the test stages add (tools/test.sh: README command 2): the
#                        sanitizer compiler, strace, promtool (prometheus), lintian and buildah for
#                        the packages and the image, the aarch64 cross compiler and qemu-user, wrk,
#                        the Python checks and the Kubernetes schemas (PyPI), and the real CUDA
#                        clients (PyTorch, CuPy, JAX wheels, pinned: tools/setup_clients.sh)
# The CUDA toolkit (cuda.h) is expected under /usr/local/cuda (or found by CMake's FindCUDAToolkit);
# only the library, its tests and examples need it (-DGPUCAP_LIBRARY=OFF builds the rest without).
set -euo pipefail
profile=${1:-build}
build_pkgs=(cmake make gcc pkg-config uthash-dev libinih-dev libunwind-dev libmicrohttpd-dev libjansson-dev
            libgnutls28-dev libcurl4-gnutls-dev libyajl-dev)
test_pkgs=(clang librsvg2-bin python3 python3-jsonpatch python3-yaml python3-pip python3-venv curl openssl strace wrk prometheus
           dpkg-dev file lintian buildah gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
case $profile in
build) pkgs=("${build_pkgs[@]}") ;;
test) pkgs=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
*) echo "usage: tools/setup.sh [build|test]" >&2; exit 2 ;;
esac
as_root=()
[ "$(id -u)" = 0 ] || as_root=(sudo)
missing=()
for p in "${pkgs[@]}"; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"install ok installed"* ]] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup ($profile): installing ${#missing[@]} Debian package(s): ${missing[*]}"
    "${as_root[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "setup ($profile): the ${#pkgs[@]} Debian packages are installed"
fi
if [ "$profile" = test ]; then
    # From PyPI, for the system python3 the tests run: the Kubernetes schemas and a CEL evaluator
    # (tests/webhook/check_manifests.py).
    for p in kubernetes-validate cel-python; do
        /usr/bin/python3 -m pip show "$p" >/dev/null 2>&1 && continue
        echo "setup ($profile): installing $p from PyPI"
        "${as_root[@]}" /usr/bin/python3 -m pip install -q --break-system-packages --root-user-action=ignore "$p"
    done
fi
if [ ! -f /usr/local/cuda/include/cuda.h ] && ! command -v nvcc >/dev/null; then
    echo "setup: the CUDA toolkit (cuda.h) is missing: install it under /usr/local/cuda (or configure with" \
         "-DGPUCAP_LIBRARY=OFF to build the webhook, the exporter, the agent and the CLI only)" >&2
    exit 1
fi
if [ "$profile" = test ]; then
    if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
        echo "setup: the CUDA toolkit's nvcc is missing (the real CUDA runtime client of the tests is built with it)" >&2
        exit 1
    fi
    # The real clients of the test suite (PyTorch, CuPy, JAX from PyPI, pinned): tests/clients.
    bash "$(dirname "$0")/setup_clients.sh"
fi
