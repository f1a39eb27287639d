#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_invisible.sh: preloaded into processes that never touch CUDA (as through /etc/ld.so.preload),
# the library prints nothing, reads no settings, creates no file and starts no thread, even with
# broken settings.
set -u
pre=$TEST_PRELOAD
. "$(dirname "$0")/../common.sh"
cd "$t"
before=$(ls -A "$t" | md5sum)
out=$(GPUCAP_MEMORY_LIMIT=garbage GPUCAP_CONFIG=/nonexistent GPUCAP_BOGUS=1 LD_PRELOAD="$pre" \
      sh -c 'ls / >/dev/null; echo hello; grep -c . /proc/self/status >/dev/null' 2>&1)
[ "$out" = "hello" ] || { echo "FAIL: output '$out'"; fail=1; }
# A sanitizer runtime preloaded in front of us has threads and files of its own: check output only.
case $pre in *san.so*) [ $fail = 0 ] && echo "invisible: no output (sanitizer build: threads and system calls not checked)"; exit $fail;; esac
threads=$(GPUCAP_MEMORY_LIMIT=1GiB LD_PRELOAD="$pre" awk '/^Threads:/ {print $2}' /proc/self/status)
[ "$threads" = 1 ] || { echo "FAIL: $threads threads"; fail=1; }
if command -v strace >/dev/null; then
    GPUCAP_MEMORY_LIMIT=1GiB LD_PRELOAD="$pre" strace -f -e trace=openat,open,creat,clone,clone3 -o "$t/trace" true
    if grep -E 'gpucap|\.ini|clone' "$t/trace" | grep -v "$pre" | grep -v 'libgpucap.so' | grep -q .; then
        echo "FAIL: system calls of an idle process:"; cat "$t/trace"; fail=1
    fi
    rm -f "$t/trace"
fi
after=$(ls -A "$t" | md5sum)
[ "$before" = "$after" ] || { echo "FAIL: files appeared"; fail=1; }
[ $fail = 0 ] && echo "invisible: no output, no thread, no file"
exit $fail
