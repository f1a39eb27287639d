#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench/loan.sh [BUILD] [ROUNDS]: the loan round trip of burstable memory (issue 35; target p99 <= 5 ms):
# bench_loan under the library against a test arbiter that lends (tests/lib/test_arbiter.c), on the
# fake driver. Prints p50, p99 and max of the time from a denied allocation above the request to its
# admission (the datagram, the arbiter's rewrite of the settings file, the re-read, the retry).
set -eu
build=${1:-build}
rounds=${2:-500}
tmp=$(mktemp -d)
arb=
trap '[ -n "$arb" ] && kill $arb 2> /dev/null; wait 2> /dev/null; rm -rf "$tmp"' EXIT
MiB=$((1024 * 1024))
"$build/tests/test_arbiter" "$tmp/arbiter.sock" "$tmp/settings.ini" grant $((128 * MiB)) $((512 * MiB)) \
    "arbiter_socket = $tmp/arbiter.sock" > "$tmp/arb.out" &
arb=$!
for _ in $(seq 100); do grep -q ready "$tmp/arb.out" 2> /dev/null && break; sleep 0.05; done
env LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=1GiB GPUCAP_CONTEXT_RESERVE=0 GPUCAP_CONFIG=$tmp/settings.ini \
    GPUCAP_LEDGER=$tmp/ledger LD_PRELOAD=$build/lib/libgpucap.so "$build/bench/bench_loan" "$rounds" "$tmp/arbiter.sock"
