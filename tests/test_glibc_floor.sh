#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_glibc_floor.sh LIB: libgpucap.so loads with glibc 2.17 or newer (x86-64, aarch64): no symbol it takes
# from glibc has a version newer than GLIBC_2.17, and it names libdl.so.2 and libpthread.so.0, where
# glibc before 2.34 defines dlopen and the pthread functions it calls (libgpucap/common/glibc_floor.h).
set -u
lib=$1
# The host's objdump reads x86-64; a cross-built aarch64 library is read with the cross one.
objdump=objdump
command -v objdump > /dev/null || { echo "skip: no objdump"; exit 77; }
if ! objdump -f "$lib" | grep -q 'elf64-x86-64'; then
    objdump=aarch64-linux-gnu-objdump
    command -v $objdump > /dev/null && $objdump -f "$lib" | grep -q aarch64 ||
        { echo "skip: the floor is pinned on x86-64 and aarch64 only"; exit 77; }
fi
objdump() { command $objdump "$@"; }
fail=0
newer=$(objdump -T "$lib" | grep -oE '\(?GLIBC_[0-9.]+\)? +[^ ]+$' | while read -r ver sym; do
    v=${ver//[()]/}; v=${v#GLIBC_}
    major=${v%%.*} rest=${v#*.} minor=${rest%%.*}
    if [ "$major" -gt 2 ] || { [ "$major" = 2 ] && [ "$minor" -gt 17 ]; }; then echo "$sym@GLIBC_$v"; fi
done)
if [ -n "$newer" ]; then
    echo "FAIL: symbols newer than GLIBC_2.17 (pin them in libgpucap/common/glibc_floor.h):"; echo "$newer"; fail=1
fi
needed=$(objdump -p "$lib" | awk '$1 == "NEEDED" {print $2}')
for n in libdl.so.2 libpthread.so.0; do
    grep -qx "$n" <<< "$needed" || { echo "FAIL: $n is not NEEDED (old glibc defines dlopen/pthread there)"; fail=1; }
done
[ $fail = 0 ] && echo "glibc floor: $(objdump -T "$lib" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -1) at most"
exit $fail
