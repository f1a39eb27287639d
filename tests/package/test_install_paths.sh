#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_install_paths.sh BUILD GPUCAP: `cmake --install` with the build's own prefix (/usr/local by
# default) puts the settings file where the library reads it (the path `gpucap help` names as the
# default of GPUCAP_CONFIG), keeps one an administrator edited, and leaves a copy under the prefix.
set -u
build=$1 gpucap=$2
. "$(dirname "$0")/../common.sh"
default=$("$gpucap" help | sed -n 's/^ *config = TEXT, default \(.*\)$/\1/p' | head -1)
[ -n "$default" ] || bad "gpucap help names no default settings file"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
DESTDIR=$t/root cmake --install "$build" > "$t/log" 2>&1 || bad "cmake --install: $(tail -5 "$t/log")"
[ -f "$t/root$default" ] || bad "installed under $prefix, the settings file is not at $default, where the library reads it: $(grep gpucap.ini "$t/log")"
cmp -s "$t/root$default" "$TEST_SOURCE/etc/gpucap.ini" || bad "$default is not the shipped file"
if [ "$prefix" != /usr ]; then
    [ -f "$t/root$prefix/share/gpucap/gpucap.ini" ] || bad "no copy under the prefix: $(grep gpucap.ini "$t/log")"
fi
# An administrator's edit survives a second install.
echo "memory_limit = 1GiB ; edited" >> "$t/root$default"
DESTDIR=$t/root cmake --install "$build" > "$t/log2" 2>&1 || bad "second install: $(tail -5 "$t/log2")"
grep -q "; edited" "$t/root$default" || bad "a second install replaced the edited $default"
grep -q "Kept: .*$default" "$t/log2" || [ "$prefix" = /usr ] || bad "the second install does not say it kept $default"
[ $fail = 0 ] && echo "ok: the settings file at $default (prefix $prefix), an edited one kept"
exit $fail
