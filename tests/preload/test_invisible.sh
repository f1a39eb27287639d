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
    # What the library itself does, whatever the path of the checkout (it may well contain
    # "gpucap"): every file the preloaded process opens beyond what the same process opens without
    # it, less the loader's search for shared objects (the library's own dependencies), and any
    # thread. The ledger, the settings file and the platform file would each be such an open.
    calls=openat,open,creat,clone,clone3
    GPUCAP_MEMORY_LIMIT=1GiB strace -f -e trace=$calls -o "$t/base" true
    GPUCAP_MEMORY_LIMIT=1GiB LD_PRELOAD="$pre" strace -f -e trace=$calls -o "$t/trace" true
    paths() { sed -n 's/^[0-9]* *\(openat\|open\|creat\)([^"]*"\([^"]*\)".*/\2/p' "$1" | sort -u; }
    extra=$(comm -13 <(paths "$t/base") <(paths "$t/trace") | grep -Ev '\.so(\.[0-9]+)*$|/glibc-hwcaps/|/tls/|/haswell/|/x86_64/' || true)
    clones=$(grep -cE '^[0-9]* *clone3?\(' "$t/trace" || true)
    if [ -n "$extra" ] || [ "${clones:-0}" != 0 ]; then
        echo "FAIL: an idle process opened $(echo "$extra" | tr '\n' ' ') and started ${clones:-0} thread(s):"; cat "$t/trace"; fail=1
    fi
    # The check sees an open the library makes (a control, so that it cannot pass by reading nothing).
    : > "$t/probe"
    GPUCAP_MEMORY_LIMIT=1GiB strace -f -e trace=$calls -o "$t/ctl" sh -c ": < '$t/probe'"
    comm -13 <(paths "$t/base") <(paths "$t/ctl") | grep -qx "$t/probe" ||
        { echo "FAIL: the trace check does not see an open"; fail=1; }
    rm -f "$t/trace" "$t/base" "$t/ctl" "$t/probe"
fi
after=$(ls -A "$t" | md5sum)
[ "$before" = "$after" ] || { echo "FAIL: files appeared"; fail=1; }
[ $fail = 0 ] && echo "invisible: no output, no thread, no file"
exit $fail
