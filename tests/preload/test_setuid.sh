#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_setuid.sh CLIENT: the library in a secure-execution process. A setuid-root copy of a CUDA
# client linked with libgpucap is run by an unprivileged user (65534) whose GPUCAP_REPORT,
# GPUCAP_LEDGER and GPUCAP_CONFIG name root-only files: nothing is created or truncated, nothing
# from those files is printed, and the library says in one line that it ignored the environment.
# Skipped (77) when not root, without setpriv, or where no directory honours setuid (nosuid).
set -u
client=$1
[ "$(id -u)" = 0 ] || { echo "skip: making a setuid-root program needs root"; exit 77; }
command -v setpriv > /dev/null || { echo "skip: no setpriv"; exit 77; }
as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
w=""
for base in "$TEST_BUILD/tests" /var/tmp /tmp; do
    d=$(mktemp -d "$base/setuid.XXXXXX" 2> /dev/null) || continue
    chmod 755 "$d" && cp /usr/bin/id "$d/id" && chmod 4755 "$d/id"
    if as_user "$d/id" 2> /dev/null | grep -q "euid=0"; then
        w=$d
        break
    fi
    rm -rf "$d"
done
[ -n "$w" ] || { echo "skip: no directory here honours setuid for uid 65534"; exit 77; }
trap 'rm -rf "$w"' EXIT
# A setuid program ignores LD_LIBRARY_PATH: the client finds the library and the fake driver in the
# build tree by its RPATH, so uid 65534 must be able to read them there (a checkout under a 0700
# directory, as mktemp -d makes, cannot be reached).
for lib in $(ldd "$client" | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p'); do
    as_user test -r "$lib" ||
        { echo "skip: uid 65534 cannot read $lib (a directory above it is closed to other users)"; exit 77; }
done
fail=0
bad() { echo "FAIL $*"; fail=1; }
cp "$client" "$w/client" && chmod 4755 "$w/client"
s=$w/secret
mkdir -m 700 "$s"
echo ROOT-ONLY-CONTENT > "$s/victim" && chmod 600 "$s/victim" && touch -d 2001-01-01 "$s/victim"
printf '[gpucap]\nSECRET_KEY_FROM_A_ROOT_FILE = 1\n' > "$s/conf.ini" && chmod 600 "$s/conf.ini"
before=$(stat -c '%s %Y %a %U' "$s/victim")
hostile() { # hostile REPORT: the client as uid 65534 with hostile settings
    as_user env -u LD_PRELOAD -u LD_LIBRARY_PATH ASAN_OPTIONS=detect_leaks=0 GPUCAP_REPORT="$1" \
        GPUCAP_LEDGER="$s/new.ledger" GPUCAP_CONFIG="$s/conf.ini" GPUCAP_MEMORY_LIMIT=64MiB GPUCAP_LOG_LEVEL=debug \
        "$w/client" a8 F > "$w/out" 2> "$w/err"
}
hostile "$s/victim"
grep -q "^results=0$" "$w/out" || bad "the client did not run: $(cat "$w/out" "$w/err")"
[ "$(stat -c '%s %Y %a %U' "$s/victim")" = "$before" ] && grep -qx ROOT-ONLY-CONTENT "$s/victim" ||
    bad "the root-only report file was changed: $(stat -c '%s %Y %a %U' "$s/victim")"
hostile "$s/new.json"
[ "$(ls -A "$s" | tr '\n' ' ')" = "conf.ini victim " ] || bad "files created in a root-only directory: $(ls -A "$s")"
grep -q "SECRET_KEY\|ROOT-ONLY" "$w/err" && bad "the contents of a root-only file were printed: $(cat "$w/err")"
[ "$(grep -c "secure-execution process" "$w/err")" = 1 ] || bad "no line saying the environment is ignored: $(cat "$w/err")"
grep -q "GPUCAP_\* variable(s) ignored" "$w/err" || bad "the line: $(cat "$w/err")"
[ $fail = 0 ] && echo "setuid: the environment named files; none was created, changed or printed"
exit $fail
