#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/package/check_deb.sh [BUILD]: the Debian packages as a node meets them. Configures BUILD
# (default build-pkg) for the prefix /usr, builds the packages with CPack (libgpucap, gpucap,
# libgpucap-dev, gpucap-webhook, gpucap-exporter and a -dbgsym for each binary one), runs lintian on
# them (any error or warning fails), checks that no .rpm is made, then installs each package on its
# own, in an order that shows what depends on what (the webhook and the exporter without the
# library), and checks against the INSTALLED files only: --version of the programs, the man pages,
# `gpucap doctor` and the oom demo under `gpucap run` and under LD_PRELOAD (on the fake driver from
# BUILD), pkg-config, a find_package(gpucap) consumer, the debug symbols of each binary found by
# its build ID; then removes each package and checks that nothing is left (purge removes the
# conffile). Needs root (dpkg -i): CI runs it on a fresh machine.
# Exit 0 pass, 1 fail, 77 skip (not root, or no dpkg).
set -euo pipefail
# No 'cmd | grep -q' here: under pipefail grep's early exit can kill cmd with SIGPIPE and fail a check that held.
cd "$(dirname "$0")/../.."
src=$PWD
build=${1:-build-pkg}
fail() { echo "check_deb: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "check_deb: skipped: dpkg -i needs root"; exit 77; }
command -v dpkg >/dev/null || { echo "check_deb: skipped: no dpkg"; exit 77; }
packages="gpucap-exporter gpucap-webhook libgpucap gpucap libgpucap-dev"
for p in $packages; do
    if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"install ok installed"* ]]; then
        fail "the package $p is installed already; remove it first (dpkg --purge $p)"
    fi
done

version=$(sed -n 's/^project(gpucap VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
echo "== check_deb: building the packages of gpucap $version in $build"
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr > "$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; fail "configure"; }
cmake --build "$build" -j"$(nproc)" > "$build/build.log" 2>&1 || { tail -30 "$build/build.log"; fail "build"; }
rm -f "$build"/*.deb "$build"/*.ddeb "$build"/*.rpm
(cd "$build" && cpack > cpack.log 2>&1) || { cat "$build/cpack.log"; fail "cpack"; }
arch=$(dpkg --print-architecture)
deb() { echo "$build/${1}_${version}_$arch.deb"; }
for p in $packages; do
    [ -f "$(deb "$p")" ] || fail "no package $p"
    [ -f "$build/${p}-dbgsym_${version}_$arch.ddeb" ] || [ "$p" = libgpucap-dev ] || fail "no $p-dbgsym"
    echo "check_deb: $(basename "$(deb "$p")") $(stat -c %s "$(deb "$p")") bytes"
done
ls "$build"/*.rpm > /dev/null 2>&1 && fail "an .rpm was made: gpucap makes none (README.md, Install)"
if command -v lintian > /dev/null; then
    lintian "$build"/*.deb "$build"/*.ddeb > "$build/lintian.log" 2>&1 || true
    grep -v "running with root" "$build/lintian.log" | grep -E "^(E|W):" && fail "lintian (all of it in $build/lintian.log)"
    echo "check_deb: lintian: no error, no warning"
else
    echo "check_deb: lintian is not installed (tools/setup.sh installs it): not run"
fi

tmp=$(mktemp -d)
cleanup() {
    for p in libgpucap-dev gpucap gpucap-webhook gpucap-exporter libgpucap; do
        dpkg --purge "$p-dbgsym" "$p" > /dev/null 2>&1 || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
install() { dpkg -i "$@" > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i $*"; }; }
need() { for f in "$@"; do [ -f "$f" ] || fail "$f is not installed"; done; }
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
lib=/usr/lib/$multiarch/gpucap/libgpucap.so
man() { for p in "$@"; do need "/usr/share/man/$p.gz"; grep -q "^.SH FILES" <<< "$(zcat "/usr/share/man/$p.gz")" || fail "$p: no FILES section"; done; }

# The webhook and the exporter, each alone: neither needs the library.
install "$(deb gpucap-exporter)"
need /usr/bin/gpucap-exporter /usr/bin/gpucap-agent /usr/share/doc/gpucap-exporter/copyright
man man1/gpucap-exporter.1 man1/gpucap-agent.1
[ "$(/usr/bin/gpucap-exporter --version)" = "gpucap-exporter $version" ] || fail "gpucap-exporter --version"
[ "$(/usr/bin/gpucap-agent --version)" = "gpucap-agent $version" ] || fail "gpucap-agent --version"
/usr/bin/gpucap-exporter --once --root "$tmp" --cards none > "$tmp/scrape" || fail "exporter --once: exit $?"
grep -q '^gpucap_exporter_ledgers 0$' "$tmp/scrape" || { cat "$tmp/scrape"; fail "exporter --once"; }
install "$(deb gpucap-webhook)"
need /usr/bin/gpucap-webhook
man man1/gpucap-webhook.1
[ "$(/usr/bin/gpucap-webhook --version)" = "gpucap-webhook $version" ] || fail "gpucap-webhook --version"
[ ! -e "$lib" ] || fail "the library came with the webhook or the exporter"

# The library with its conffile, then the CLI (which depends on it), then the development files.
install "$(deb libgpucap)"
need "$lib" /etc/gpucap/gpucap.ini
man man5/gpucap.ini.5
grep -q /etc/gpucap/gpucap.ini <<< "$(dpkg-query -W -f='${Conffiles}\n' libgpucap)" || fail "gpucap.ini is not a conffile"
[ ! -e /usr/include/gpucap.h ] && [ ! -e /usr/bin/gpucap ] || fail "libgpucap holds more than the library"
install "$(deb gpucap)"
need /usr/bin/gpucap
man man1/gpucap.1
[ "$(/usr/bin/gpucap --version)" = "gpucap $version" ] || fail "gpucap --version: $(/usr/bin/gpucap --version)"
grep -q "GPUCAP_MEMORY_LIMIT" <<< "$(zcat /usr/share/man/man1/gpucap.1.gz)" || fail "the man page lacks the settings table"
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
grep -q "^gpucap report (gpucap $version)" "$tmp/demo" || { cat "$tmp/demo"; fail "demo: no report"; }
GPUCAP_LEDGER=off GPUCAP_MEMORY_LIMIT=1GiB LD_PRELOAD=$lib \
    "$build/examples/oom-demo" > "$tmp/demo2" 2>&1 || { cat "$tmp/demo2"; fail "the demo under LD_PRELOAD"; }
grep -q "allocation 4 answered CUDA_ERROR_OUT_OF_MEMORY" "$tmp/demo2" || { cat "$tmp/demo2"; fail "LD_PRELOAD demo"; }
unset LD_LIBRARY_PATH
echo "check_deb: doctor and the demo ran on the installed files"

install "$(deb libgpucap-dev)"
need /usr/include/gpucap.h /usr/include/gpucap_version.h /usr/lib/"$multiarch"/pkgconfig/gpucap.pc \
     /usr/lib/"$multiarch"/cmake/gpucap/gpucapConfig.cmake
[ "$(pkg-config --modversion gpucap)" = "$version" ] || fail "pkg-config --modversion: $(pkg-config --modversion gpucap)"
[ "$(pkg-config --variable=preload gpucap)" = "$lib" ] || fail "pkg-config preload: $(pkg-config --variable=preload gpucap)"
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

# Debug symbols: each binary is stripped, and its -dbgsym holds the symbols under its build ID.
for pair in gpucap:/usr/bin/gpucap gpucap-webhook:/usr/bin/gpucap-webhook gpucap-exporter:/usr/bin/gpucap-exporter \
            "libgpucap:$lib"; do
    p=${pair%%:*} f=${pair#*:}
    [[ $(file -L "$f") == *"not stripped"* ]] && fail "$f is not stripped"
    install "$build/${p}-dbgsym_${version}_$arch.ddeb"
    id=$(readelf -n "$f" | sed -n 's/.*Build ID: *//p')
    [ -n "$id" ] && [ -f "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] || fail "$p-dbgsym: no symbols for $f ($id)"
done
echo "check_deb: the debug symbols of each binary are found by its build ID"

# Removal, one package at a time; purge takes the conffile.
for p in libgpucap-dev gpucap gpucap-webhook gpucap-exporter libgpucap; do
    dpkg --purge "$p-dbgsym" > /dev/null 2>&1 || true
    dpkg --purge "$p" > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg --purge $p"; }
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *installed* ]] && fail "$p still installed"
done
for f in /usr/bin/gpucap /usr/bin/gpucap-webhook /usr/bin/gpucap-exporter "$lib" /etc/gpucap/gpucap.ini \
         /usr/include/gpucap.h /usr/lib/debug/.build-id; do
    [ ! -e "$f" ] || [ "$f" = /usr/lib/debug/.build-id ] || fail "$f is left after dpkg --purge"
done
echo "check_deb: each package installed, ran and was removed"
