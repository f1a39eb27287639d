# SPDX-License-Identifier: Apache-2.0
# CMake toolchain for libgpucap on aarch64 (Grace Hopper nodes) with Debian's cross compiler
# (gcc-aarch64-linux-gnu); tests run under qemu-user. Used by tools/cross/aarch64.sh, which also
# fetches the arm64 build of inih into GPUCAP_ARM64_SYSROOT.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
