#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tools/setup_clients.sh: the real clients of the test suite (tests/clients): PyTorch, CuPy and JAX
# from PyPI, each in a virtualenv of its own with every package pinned (tests/clients/
# requirements-<client>.txt, installed with --no-deps: exactly those versions). Called by
# tools/setup.sh. A virtualenv is named after a hash of its requirements, so a changed pin makes a
# fresh one and an unchanged one is reused; `clients_dir` prints where they are (the ctest suite
# finds them the same way, tests/clients/CMakeLists.txt).
#   GPUCAP_CLIENTS_DIR  where the virtualenvs live (default ${XDG_CACHE_HOME:-$HOME/.cache}/gpucap/clients)
# Exit 1 when a client cannot be installed or does not import: the checks would fail without it,
# so the set-up fails first, with the reason. Prints the time each install took.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${GPUCAP_CLIENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpucap/clients}
python=/usr/bin/python3
[ -x $python ] || python=$(command -v python3)
mkdir -p "$dir"
for client in torch cupy jax; do
    req=tests/clients/requirements-$client.txt
    venv=$dir/$client-$(sha256sum "$req" | cut -c1-12)
    if [ -f "$venv/.complete" ]; then
        echo "setup: $client: $venv (installed before)"
        continue
    fi
    echo "setup: $client: installing $(grep -c '==' "$req") pinned packages into $venv"
    start=$(date +%s)
    rm -rf "$venv"
    if ! $python -m venv "$venv" > "$dir/$client.log" 2>&1 ||
       ! "$venv/bin/python" -m pip install --no-deps --disable-pip-version-check -q -r "$req" >> "$dir/$client.log" 2>&1; then
        echo "setup: $client could not be installed (the real-client checks need it): see $dir/$client.log" >&2
        tail -5 "$dir/$client.log" >&2
        exit 1
    fi
    if ! "$venv/bin/python" -c "import $client" >> "$dir/$client.log" 2>&1; then
        echo "setup: $client was installed but does not import: see $dir/$client.log" >&2
        tail -5 "$dir/$client.log" >&2
        exit 1
    fi
    touch "$venv/.complete"
    echo "setup: $client installed in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
done
