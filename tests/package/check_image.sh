#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/package/check_image.sh [BUILD]: the library image with Debian's buildah, as far as this
# machine allows. The Dockerfile's bases (nvidia/cuda, busybox, ubuntu) need a registry, which CI
# machines cannot reach; so this builds the library image's final stage from BUILD's files, laid
# out by the same stage-library.sh the Dockerfile runs, FROM scratch: it checks that the image holds
# the library, the CLI and the C library files only, that `gpucap --version` and `gpucap doctor`
# run in it, and that .dockerignore keeps .git and build trees out of the build context.
# Exit 0 pass, 1 fail, 77 skip (no buildah, or not root).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
fail() { echo "check_image: FAIL: $*" >&2; exit 1; }
command -v buildah > /dev/null || { echo "check_image: skipped: no buildah"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "check_image: skipped: buildah needs root here"; exit 77; }
[ -x "$build/tools/gpucap/gpucap" ] && [ -f "$build/lib/libgpucap.so" ] || fail "build $build first"
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
tmp=$(mktemp -d)
tag=localhost/gpucap-check-$$
cleanup() {
    buildah rmi -f "$tag:lib" "$tag:ctx" > /dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

sh examples/kubernetes/stage-library.sh "$build" "$tmp/ctx/root"
(cd "$tmp/ctx/root" && find . -type f | sort) > "$tmp/files"
grep -vE '^\./(usr/local/gpucap/(lib/libgpucap\.so|bin/gpucap)|(usr/)?lib(64|/[a-z0-9_-]+-linux-gnu)?/(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|libjansson\.so\.4|ld-linux[^/]*\.so\.[0-9]))$' \
    "$tmp/files" && fail "the library image holds more than the library, the CLI and the C libraries they run on (libc and its libm, libdl, libpthread; jansson)"
sed -n '/^FROM scratch AS library$/,/^ENTRYPOINT/p' examples/kubernetes/Dockerfile |
    sed 's|^COPY --from=lib-build /library/ /$|COPY root/ /|' > "$tmp/ctx/Containerfile"
grep -q '^COPY root/ /$' "$tmp/ctx/Containerfile" || fail "the Dockerfile's library stage changed: $(cat "$tmp/ctx/Containerfile")"
buildah bud -q -t "$tag:lib" -f "$tmp/ctx/Containerfile" "$tmp/ctx" > "$tmp/bud.log" 2>&1 ||
    { cat "$tmp/bud.log"; fail "buildah bud of the library stage"; }
ctr=$(buildah from "$tag:lib")
out=$(buildah run "$ctr" -- /usr/local/gpucap/bin/gpucap --version 2>&1) || { buildah rm "$ctr" > /dev/null; fail "gpucap --version in the image: $out"; }
version=$(sed -n 's/^project(gpucap VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$out" = "gpucap $version" ] || { buildah rm "$ctr" > /dev/null; fail "gpucap --version in the image: $out"; }
buildah run "$ctr" -- /usr/local/gpucap/bin/gpucap doctor > "$tmp/doctor" 2>&1 || true
buildah rm "$ctr" > /dev/null
grep -q "^PASS  library: /usr/local/gpucap/lib/libgpucap.so exports all" "$tmp/doctor" ||
    fail "gpucap doctor in the image did not find the library beside it: $(cat "$tmp/doctor")"
size=$(du -sk "$tmp/ctx/root" | cut -f1)
echo "check_image: library image built FROM scratch: $(wc -l < "$tmp/files") files, ${size} KiB"

# The build context as buildah sees it through .dockerignore: sources, no .git, no build tree.
printf 'FROM scratch\nCOPY . /ctx\n' > "$tmp/Containerfile.ctx"
buildah bud -q -t "$tag:ctx" -f "$tmp/Containerfile.ctx" . > "$tmp/ctx.log" 2>&1 || { cat "$tmp/ctx.log"; fail "context build"; }
mnt=$(buildah from "$tag:ctx")
root=$(buildah mount "$mnt")
[ -f "$root/ctx/CMakeLists.txt" ] && [ -f "$root/ctx/libgpucap/common/options.c" ] || fail "the sources are not in the context"
[ ! -e "$root/ctx/.git" ] || fail ".git is in the build context"
ls -d "$root"/ctx/build* > /dev/null 2>&1 && fail "a build tree is in the build context: $(ls -d "$root"/ctx/build*)"
echo "check_image: build context $(du -sk "$root/ctx" | cut -f1) KiB, without .git and build trees"
buildah umount "$mnt" > /dev/null
buildah rm "$mnt" > /dev/null
