#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# fix-dbgsym.sh DDEB...: repairs the -dbgsym packages CPack makes (cmake/install.cmake runs it after
# CPack): CPack's md5sums name the files by their absolute build paths, and the packages lack
# /usr/share/doc/<package>, which a -dbgsym package makes a link to its package's (which it depends
# on), as dh_strip does. Each package is unpacked, given both, and packed again, owned by root.
set -eu
for ddeb in "$@"; do
    tmp=$(mktemp -d)
    dpkg-deb -R "$ddeb" "$tmp/root"
    pkg=$(sed -n 's/^Package: //p' "$tmp/root/DEBIAN/control")
    base=${pkg%-dbgsym}
    mkdir -p "$tmp/root/usr/share/doc"
    ln -sfn "$base" "$tmp/root/usr/share/doc/$pkg"
    (cd "$tmp/root" && find usr -type f -print0 | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
    chmod 0644 "$tmp/root/DEBIAN/md5sums"
    dpkg-deb --root-owner-group -Zxz -b "$tmp/root" "$ddeb" > /dev/null
    rm -rf "$tmp"
done
