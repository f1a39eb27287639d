#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gpucap-install.sh: the installer image's entry point (installer-daemonset.yaml).
#
# Puts /opt/gpucap/libgpucap.so at $INSTALL_VAR_LIB/gpucap/libgpucap.so and, when the node has
# none, /opt/gpucap/gpucap.ini at $INSTALL_ETC/gpucap.ini. The first install builds the directory
# aside and renames it into place, so /var/lib/gpucap never exists without the library (injected
# pods mount it with hostPath type Directory and wait for it). Later installs rename a new file
# over the old one: processes that preloaded the old copy keep their mapping. An administrator's
# gpucap.ini is never overwritten.
set -eu
src=/opt/gpucap
var_lib=${INSTALL_VAR_LIB:?}
etc=${INSTALL_ETC:?}
dir=$var_lib/gpucap

if [ ! -d "$dir" ]; then
    stage=$var_lib/.gpucap.install.$$
    rm -rf "$stage"
    mkdir -m 0755 "$stage"
    cp "$src/libgpucap.so" "$stage/libgpucap.so"
    chmod 0644 "$stage/libgpucap.so"
    mv "$stage" "$dir"
    echo "gpucap-install: installed $dir/libgpucap.so"
elif ! cmp -s "$src/libgpucap.so" "$dir/libgpucap.so"; then
    cp "$src/libgpucap.so" "$dir/.libgpucap.so.new"
    chmod 0644 "$dir/.libgpucap.so.new"
    mv -f "$dir/.libgpucap.so.new" "$dir/libgpucap.so"
    echo "gpucap-install: updated $dir/libgpucap.so"
else
    echo "gpucap-install: $dir/libgpucap.so is current"
fi

if [ ! -e "$etc/gpucap.ini" ]; then
    cp "$src/gpucap.ini" "$etc/.gpucap.ini.new"
    chmod 0644 "$etc/.gpucap.ini.new"
    mv "$etc/.gpucap.ini.new" "$etc/gpucap.ini"
    echo "gpucap-install: installed $etc/gpucap.ini"
fi
