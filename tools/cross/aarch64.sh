#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tools/cross/aarch64.sh [BUILD_DIR]: builds libgpucap.so, the fake driver and the tests for aarch64
# (Grace Hopper nodes) with Debian's cross compiler, and runs the single-process tests under
# qemu-user: every call route, coverage of arrays/pools/graphs/contexts, NVML, cuGetProcAddress,
# the settings, the lifecycle and the glibc 2.17 floor. Tests that start other processes (the ledger's, the CLI's, the
# shell scripts) need binfmt_misc, which a container rarely has: they are left out. The arm64 build
# of inih and jansson is fetched into BUILD_DIR/sysroot with apt-get download, without adding the architecture
# to dpkg. Exit 77 when the cross compiler or qemu-user is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build-aarch64}
command -v aarch64-linux-gnu-gcc > /dev/null && command -v qemu-aarch64 > /dev/null ||
    { echo "aarch64: skipped (install gcc-aarch64-linux-gnu and qemu-user)"; exit 77; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sysroot=$dir/sysroot
if [ ! -f "$sysroot/usr/lib/aarch64-linux-gnu/libinih.a" ] || [ ! -f "$sysroot/usr/lib/aarch64-linux-gnu/libjansson.so.4" ]; then
    lists=$dir/apt-lists
    mkdir -p "$lists/partial" "$dir/debs"
    o=(-oAPT::Architecture=arm64 -oAPT::Architectures=arm64 -oDir::State::Lists="$lists" -oDebug::NoLocking=1)
    # The only things fetched (inih for the library, jansson for the CLI's plot): without Debian's
    # archive there is no arm64 build of them, and nothing to test.
    if ! apt-get "${o[@]}" update -qq ||
       ! (cd "$dir/debs" && apt-get "${o[@]}" download libinih-dev libinih1 libjansson-dev libjansson4 2> /dev/null); then
        echo "aarch64: skipped (the arm64 builds of libinih-dev and libjansson-dev could not be fetched)"
        exit 77
    fi
    for f in "$dir"/debs/*.deb; do dpkg -x "$f" "$sysroot"; done
fi
PKG_CONFIG_LIBDIR=$sysroot/usr/lib/aarch64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=$sysroot \
    cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$PWD/tools/cross/aarch64-linux-gnu.cmake" -DGPUCAP_WEBHOOK=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j"$(nproc)" > "$dir.build.log" 2>&1 || { tail -50 "$dir.build.log"; exit 1; }
grep -q AArch64 <<< "$(aarch64-linux-gnu-readelf -h "$dir/lib/libgpucap.so")" || { echo "aarch64: libgpucap.so is not an aarch64 library"; exit 1; }
ctest --test-dir "$dir" -j"$(nproc)" --output-on-failure \
    -R '^(route|coverage|nvml|procaddr|settings\.unit|lifecycle\.constructor|exports\.glibc_floor)'
