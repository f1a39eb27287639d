#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# stage-library.sh BUILD ROOT: lays out the gpucap library image's whole file tree in ROOT from a
# build tree: /usr/local/gpucap/lib/libgpucap.so, /usr/local/gpucap/bin/gpucap (which copies both
# into a pod: `gpucap inject`), and the C library files the CLI needs to run in an image FROM
# scratch, and those the library names (so that `gpucap doctor` can load it there): ldd's lists,
# nothing else. Used by the Dockerfile's library stage and by
# tests/package/check_image.sh, so the image and its check are laid out by the same code.
set -eu
build=${1:?usage: stage-library.sh BUILD ROOT}
root=${2:?usage: stage-library.sh BUILD ROOT}
mkdir -p "$root/usr/local/gpucap/lib" "$root/usr/local/gpucap/bin"
cp "$build/lib/libgpucap.so" "$root/usr/local/gpucap/lib/libgpucap.so"
cp "$build/tools/gpucap/gpucap" "$root/usr/local/gpucap/bin/gpucap"
# "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)".
for lib in $(ldd "$build/tools/gpucap/gpucap" "$build/lib/libgpucap.so" | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\).*/\1/p'); do
    [ -e "$root$lib" ] && continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
