#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tools/test.sh: the whole test suite, as CI runs it: set-up (with the real clients, tools/setup_clients.sh),
# a normal build and its tests (the real-client checks included), then the
# suite again under AddressSanitizer + UndefinedBehaviorSanitizer and under ThreadSanitizer, the
# aarch64 cross build with its single-process tests under qemu-user, and a bounded fuzzing run of
# the webhook's request handler.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh test
jobs=$(nproc)
build() { # build DIR [cmake args]
    local dir=$1; shift
    cmake -S . -B "$dir" "$@" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
    cmake --build "$dir" -j"$jobs" > "$dir.build.log" 2>&1 || { tail -50 "$dir.build.log"; exit 1; }
}
echo "== build and test"
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
ctest --test-dir build -j"$jobs" --output-on-failure
echo "== build and test again from a checkout whose path contains 'gpucap' (as a git clone makes it)"
# No test may depend on where the checkout is: the tree (tracked and untracked, not ignored) is
# copied under such a path and its suite run there once.
case $PWD in
*gpucap*) echo "(this checkout's path contains 'gpucap' already: the stage above was that run)" ;;
*)
    away=$(mktemp -d /tmp/gpucap-path.XXXXXX)
    trap 'rm -rf "$away"' EXIT
    git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | (mkdir -p "$away/gpucap" && tar -xf - -C "$away/gpucap")
    (cd "$away/gpucap" && build build -DCMAKE_BUILD_TYPE=RelWithDebInfo && ctest --test-dir build -j"$jobs" --output-on-failure)
    rm -rf "$away"
    trap - EXIT
    ;;
esac
echo "== the webhook, the exporter, the agent and the CLI without the CUDA toolkit (as their images build)"
build build-nocuda -DCMAKE_BUILD_TYPE=Release -DGPUCAP_LIBRARY=OFF
for p in tools/webhook/gpucap-webhook tools/exporter/gpucap-exporter tools/agent/gpucap-agent tools/gpucap/gpucap; do
    [ -x "build-nocuda/$p" ] && "build-nocuda/$p" --version > /dev/null || { echo "build-nocuda/$p does not run"; exit 1; }
done
echo "== AddressSanitizer + UndefinedBehaviorSanitizer"
build build-asan -DCMAKE_BUILD_TYPE=Debug -DGPUCAP_SANITIZE=address,undefined
# The real-client checks (label clients) run in the normal build only: they preload the library
# into Python and the frameworks, where a sanitizer runtime would have to be preloaded first; the
# library's paths they take have sanitizer coverage of their own in the other tests.
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --test-dir build-asan -j"$jobs" --output-on-failure -LE clients
echo "== ThreadSanitizer"
build build-tsan -DCMAKE_BUILD_TYPE=Debug -DGPUCAP_SANITIZE=thread
# cli.run is left out: `gpucap run` preloads the instrumented library into uninstrumented programs
# (sh), where ThreadSanitizer's runtime cannot start first.
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan -j"$jobs" --output-on-failure -E '^cli\.run$' -LE clients
echo "== aarch64: cross build, single-process tests under qemu-user"
rc=0
bash tools/cross/aarch64.sh build-aarch64 || rc=$?
if [ $rc != 0 ] && [ $rc != 77 ]; then exit $rc; fi
echo "== fuzzing the webhook's request handler (60 s)"
rc=0
bash tests/webhook/fuzz.sh 60 || rc=$?
if [ $rc != 0 ] && [ $rc != 77 ]; then exit $rc; fi
echo "== all test stages passed"
