#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_counts.sh GPUCAP CLI_ALLOC: the report's allocation and free counts of a process that
# ends without its exit handlers (SIGKILL, _exit) are what it did, as after a normal exit (they
# were flushed only there: "allocations 0, frees 0" beside a right peak); a thread's first 64
# events go in one by one, so a short job's are exact, on every thread. "Held at exit" is what a
# process held when it began to exit, also when an exit handler of the CUDA runtime's (op R: one
# registered before the first allocation, which releases the primary context) freed it all before
# the library's destructor.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
export FAKECUDA_CTX_BYTES=0 GPUCAP_CONTEXT_RESERVE=0
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['devices'][0][sys.argv[2]])" "$t/r.json" "$1"; }
for end in "" K X; do
    "$gpucap" run --memory 64MiB --report "$t/r.json" --json -- "$alloc" a4 a4 a4 F a8 $end > "$t/out" 2> "$t/err"
    what=${end:-a normal exit}
    [ "$(field allocations)" = 4 ] && [ "$(field frees)" = 3 ] && [ "$(field peak)" = $((12 * MiB)) ] ||
        bad "$what: allocations $(field allocations), frees $(field frees), peak $(field peak); want 4, 3, $((12 * MiB))"
done
# A child killed, beside a parent that exits normally: the counts of both.
"$gpucap" run --memory 64MiB --report "$t/r.json" --json -- "$alloc" a2 c:a1,a1,K F > "$t/out" 2> "$t/err"
[ "$(field allocations)" = 3 ] && [ "$(field frees)" = 1 ] ||
    bad "parent and killed child: allocations $(field allocations), frees $(field frees); want 3, 1"
# Held at exit: what is still allocated when exit begins (a child's added), the runtime-like
# handler releasing the context at exit or not.
for case in "a8:8" "R a8:8" "R a1 a2 F a8:8" "R a8 c:R,a4:12"; do
    ops=${case%:*}
    "$gpucap" run --memory 64MiB --report "$t/r.json" --json -- "$alloc" $ops > "$t/out" 2> "$t/err"
    [ "$(field held_at_exit)" = $((${case##*:} * MiB)) ] ||
        bad "held at exit after '$ops': $(field held_at_exit), want $((${case##*:} * MiB))"
done
exit $fail
