#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/package/check_deb.sh [BUILD]: the .deb as a platform engineer meets it. Configures BUILD
# (default build-pkg) for the prefix /usr, builds the package with CPack (and the .rpm where rpmbuild
# is installed), installs the .deb with dpkg -i, then against the INSTALLED files only: --version
# of both programs, `gpucap doctor` and the oom demo under `gpucap run` and under LD_PRELOAD (on the
# fake driver from BUILD), pkg-config --modversion, a find_package(gpucap) consumer; then purges the
# package and checks that nothing is left. Needs root (dpkg -i): CI runs it on a fresh machine.
# Exit 0 pass, 1 fail, 77 skip (not root, or no dpkg).
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$PWD
build=${1:-build-pkg}
fail() { echo "check_deb: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "check_deb: skipped: dpkg -i needs root"; exit 77; }
command -v dpkg >/dev/null || { echo "check_deb: skipped: no dpkg"; exit 77; }
if dpkg-query -W -f='${Status}' gpucap 2>/dev/null | grep -q "install ok installed"; then
    fail "a gpucap package is installed already; remove it first (dpkg --purge gpucap)"
fi

version=$(sed -n 's/^project(gpucap VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
echo "== check_deb: building the packages of gpucap $version in $build"
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr > "$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; fail "configure"; }
cmake --build "$build" -j"$(nproc)" > "$build/build.log" 2>&1 || { tail -30 "$build/build.log"; fail "build"; }
(cd "$build" && cpack > cpack.log 2>&1) || { cat "$build/cpack.log"; fail "cpack"; }
deb=$(ls "$build"/gpucap_"$version"_*.deb)
echo "check_deb: $deb ($(stat -c %s "$deb") bytes)"
if command -v rpmbuild >/dev/null; then
    rpm=$(ls "$build"/gpucap-"$version"-*.rpm) || fail "rpmbuild is installed but CPack made no .rpm"
    echo "check_deb: $rpm ($(stat -c %s "$rpm") bytes)"
    rpm -qlp "$rpm" 2>/dev/null | grep -qx "/usr/lib/$(gcc -print-multiarch)/gpucap/libgpucap.so" ||
        fail "the .rpm does not hold the library in its private directory"
fi

tmp=$(mktemp -d)
cleanup() {
    dpkg --purge gpucap > /dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
dpkg -i "$deb" > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
lib=/usr/lib/$multiarch/gpucap/libgpucap.so
for f in /usr/bin/gpucap /usr/bin/gpucap-webhook /usr/bin/gpucap-exporter "$lib" /usr/include/gpucap.h /usr/include/gpucap_version.h \
         /usr/lib/"$multiarch"/pkgconfig/gpucap.pc /usr/lib/"$multiarch"/cmake/gpucap/gpucapConfig.cmake \
         /etc/gpucap/gpucap.ini /usr/share/man/man1/gpucap.1 /usr/share/man/man1/gpucap-webhook.1 \
         /usr/share/man/man1/gpucap-exporter.1 \
         /usr/share/doc/gpucap/LICENSE; do
    [ -f "$f" ] || fail "$f is not installed"
done
dpkg-query -W -f='${Conffiles}\n' gpucap | grep -q /etc/gpucap/gpucap.ini || fail "gpucap.ini is not a conffile"

[ "$(/usr/bin/gpucap --version)" = "gpucap $version" ] || fail "gpucap --version: $(/usr/bin/gpucap --version)"
[ "$(/usr/bin/gpucap-webhook --version)" = "gpucap-webhook $version" ] || fail "gpucap-webhook --version"
[ "$(/usr/bin/gpucap-exporter --version)" = "gpucap-exporter $version" ] || fail "gpucap-exporter --version"
[ "$(pkg-config --modversion gpucap)" = "$version" ] || fail "pkg-config --modversion: $(pkg-config --modversion gpucap)"
[ "$(pkg-config --variable=preload gpucap)" = "$lib" ] || fail "pkg-config preload: $(pkg-config --variable=preload gpucap)"
grep -q "GPUCAP_MEMORY_LIMIT" /usr/share/man/man1/gpucap.1 || fail "the man page lacks the settings table"
/usr/bin/gpucap check > "$tmp/check" 2>&1 || { cat "$tmp/check"; fail "gpucap check of the installed gpucap.ini"; }
grep -q "config file: /etc/gpucap/gpucap.ini$" "$tmp/check" || fail "gpucap check did not read /etc/gpucap/gpucap.ini"

# On the fake driver (a 16 GiB card) that the tests build: the installed CLI finds the installed library.
export LD_LIBRARY_PATH=$src/$build/fake FAKECUDA_MEM=16GiB
unset GPUCAP_LIB LD_PRELOAD
/usr/bin/gpucap run --memory 1GiB -- /usr/bin/gpucap doctor > "$tmp/doctor" 2>&1 || true
cat "$tmp/doctor"
grep -q "^PASS  preload" "$tmp/doctor" || fail "doctor: the library is not preloaded by gpucap run"
grep -q "^PASS  library: $lib exports all" "$tmp/doctor" || fail "doctor did not check the installed library"
/usr/bin/gpucap run --memory 1GiB --report - -- "$build/examples/oom-demo" > "$tmp/demo" 2>&1 ||
    { cat "$tmp/demo"; fail "the demo under gpucap run"; }
grep -q "allocation 4 answered CUDA_ERROR_OUT_OF_MEMORY" "$tmp/demo" || { cat "$tmp/demo"; fail "demo: no denial at 1 GiB"; }
grep -q "^gpucap report (version $version)" "$tmp/demo" || { cat "$tmp/demo"; fail "demo: no report"; }
GPUCAP_LEDGER=off GPUCAP_MEMORY_LIMIT=1GiB LD_PRELOAD=$(pkg-config --variable=preload gpucap) \
    "$build/examples/oom-demo" > "$tmp/demo2" 2>&1 || { cat "$tmp/demo2"; fail "the demo under LD_PRELOAD"; }
grep -q "allocation 4 answered CUDA_ERROR_OUT_OF_MEMORY" "$tmp/demo2" || { cat "$tmp/demo2"; fail "LD_PRELOAD demo"; }
echo "check_deb: doctor and the demo ran on the installed files"

# A program that uses the public API through find_package(gpucap).
mkdir -p "$tmp/consumer"
cat > "$tmp/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES C)
find_package(gpucap REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE gpucap::gpucap)
file(WRITE ${CMAKE_BINARY_DIR}/preload.txt "${GPUCAP_PRELOAD}")
CMAKE
cat > "$tmp/consumer/main.c" <<'C'
#include <gpucap.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    printf("%s\n", gpucap_version());
    return strcmp(gpucap_version(), GPUCAP_VERSION_STRING) != 0;
}
C
(cmake -S "$tmp/consumer" -B "$tmp/consumer/build" && cmake --build "$tmp/consumer/build") > "$tmp/consumer.log" 2>&1 ||
    { cat "$tmp/consumer.log"; fail "find_package(gpucap) consumer does not build"; }
[ "$("$tmp/consumer/build/consumer")" = "$version" ] || fail "the consumer's gpucap_version()"
[ "$(cat "$tmp/consumer/build/preload.txt")" = "$lib" ] || fail "GPUCAP_PRELOAD: $(cat "$tmp/consumer/build/preload.txt")"
echo "check_deb: find_package(gpucap) consumer built and ran"

dpkg --purge gpucap > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg --purge"; }
for f in /usr/bin/gpucap "$lib" /etc/gpucap/gpucap.ini /usr/include/gpucap.h; do
    [ ! -e "$f" ] || fail "$f is left after dpkg --purge"
done
echo "check_deb: the package installed, ran and was removed"
