#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tools/setup.sh: installs what gpucap needs to build and test, from Debian packages, when missing.
# The CUDA toolkit (cuda.h) is expected under /usr/local/cuda (or found by CMake's FindCUDAToolkit).
set -euo pipefail
pkgs=(cmake make gcc clang pkg-config uthash-dev libinih-dev libunwind-dev libmicrohttpd-dev libjansson-dev librsvg2-bin
      libgnutls28-dev libcurl4-gnutls-dev python3 python3-jsonpatch python3-yaml python3-pip python3-venv curl openssl strace wrk
      prometheus dpkg-dev file lintian buildah gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
missing=()
for p in "${pkgs[@]}"; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"install ok installed"* ]] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# From PyPI, for the system python3 the tests run: the Kubernetes schemas and a CEL evaluator
# (tests/webhook/check_manifests.py).
for p in kubernetes-validate cel-python; do
    /usr/bin/python3 -m pip show "$p" >/dev/null 2>&1 ||
        $([ "$(id -u)" = 0 ] || echo sudo) /usr/bin/python3 -m pip install -q --break-system-packages \
            --root-user-action=ignore "$p" >/dev/null
done
if [ ! -f /usr/local/cuda/include/cuda.h ] && ! command -v nvcc >/dev/null; then
    echo "setup: the CUDA toolkit (cuda.h) is missing: install it under /usr/local/cuda" >&2
    exit 1
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
    echo "setup: the CUDA toolkit's nvcc is missing (the real CUDA runtime client of the tests is built with it)" >&2
    exit 1
fi
# The real clients of the test suite (PyTorch, CuPy, JAX from PyPI, pinned): tests/clients.
bash "$(dirname "$0")/setup_clients.sh"
