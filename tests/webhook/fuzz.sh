#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fuzz.sh: builds the webhook's libFuzzer harness with clang and runs it for a bounded time.
#
# usage: tests/webhook/fuzz.sh SECONDS [WORKDIR]
# Compiles fuzz_admission.c with the handler's files and units.c directly (the main build may use gcc) under
# -fsanitize=fuzzer,address,undefined, seeds a corpus with the fixtures, and fuzzes for SECONDS.
# A crash, leak, sanitizer report or contract violation exits nonzero and leaves the input in
# WORKDIR/artifacts (kept; WORKDIR defaults to a temporary directory). Exit 77 without clang.
set -eu
SECONDS_TO_RUN=${1:?usage: fuzz.sh SECONDS [WORKDIR]}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CC=${FUZZ_CC:-clang}
command -v "$CC" >/dev/null || { echo "fuzz.sh: $CC not found; skipping"; exit 77; }
pkg-config --exists jansson || { echo "fuzz.sh: jansson development files missing"; exit 1; }
W=${2:-$(mktemp -d /tmp/gpucap-fuzz.XXXXXX)}
mkdir -p "$W/corpus" "$W/artifacts"

# The schedulers' requests (KAI annotations, HAMi resources).
REQUESTS=$ROOT/tools/webhook/requests.c
# The handler, one file per concern (tools/webhook/review.h).
HANDLER=$(for f in admission patch detect tenant precedence inject update; do printf "%s " "$ROOT/tools/webhook/$f.c"; done)
# shellcheck disable=SC2046,SC2086
"$CC" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    -I"$ROOT/libgpucap" -I"$ROOT/tools/webhook" \
    "$ROOT/tests/webhook/fuzz_admission.c" $HANDLER "$REQUESTS" "$ROOT/libgpucap/common/units.c" \
    $(pkg-config --cflags --libs jansson) -o "$W/fuzz_admission"
cp "$ROOT"/tests/webhook/fixtures/*.json "$W/corpus/"

echo "fuzz.sh: fuzzing for ${SECONDS_TO_RUN}s in $W"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
"$W/fuzz_admission" "$W/corpus" -dict="$ROOT/tests/webhook/fuzz.dict" -max_total_time="$SECONDS_TO_RUN" \
    -max_len=65536 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$W/artifacts/" -print_final_stats=1 \
    2>"$W/fuzz.log" || {
    tail -n 60 "$W/fuzz.log"
    echo "fuzz.sh: FAILED; the input is in $W/artifacts"
    exit 1
}
grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$W/fuzz.log" || true
echo "fuzz.sh: no crash in ${SECONDS_TO_RUN}s"
[ -n "${2:-}" ] || rm -rf "$W"
