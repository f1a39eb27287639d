#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_report_file.sh GPUCAP CLI_ALLOC: the report file (GPUCAP_REPORT at exit, `gpucap run
# --report`) is never written through a link: a symbolic link at its name is refused (its target
# untouched, a dangling one not created), a hard link is replaced, not written through; a
# directory every user can write is refused unless it is sticky (as /tmp is); a report replacing
# one of ours keeps its mode.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
lib() { # lib REPORT: a process under the library that writes REPORT at exit
    GPUCAP_REPORT=$1 LD_PRELOAD=$TEST_PRELOAD "$alloc" a8 F > /dev/null 2> "$t/err"
}
echo KEEP > "$t/target"
ln -s "$t/target" "$t/link"
lib "$t/link"
[ "$(cat "$t/target")" = KEEP ] || bad "symlink: written through to its target"
[ -L "$t/link" ] || bad "symlink: replaced"
grep -qF "gpucap: error: report $t/link: is a symbolic link: refused" "$t/err" || bad "symlink: $(cat "$t/err")"
ln -s "$t/nowhere" "$t/dangling"
lib "$t/dangling"
[ -e "$t/nowhere" ] && bad "dangling symlink: its target was created"
"$gpucap" run --memory 64MiB --report "$t/link" -- "$alloc" a8 F > /dev/null 2> "$t/err"
[ "$(cat "$t/target")" = KEEP ] || bad "gpucap run: written through a symlink"
grep -qF "is a symbolic link: refused" "$t/err" || bad "gpucap run symlink: $(cat "$t/err")"

echo KEEP > "$t/other"
ln "$t/other" "$t/hard"
lib "$t/hard"
[ "$(cat "$t/other")" = KEEP ] || bad "hard link: written through to the other name"
grep -q "^gpucap report" "$t/hard" || bad "hard link: no report at its own name"

mkdir -m 777 "$t/open" "$t/sticky" && chmod 777 "$t/open" && chmod 1777 "$t/sticky"
lib "$t/open/r.txt"
[ -e "$t/open/r.txt" ] && bad "world-writable directory: written"
grep -qF "its directory $t/open is writable by every user and not sticky: refused" "$t/err" ||
    bad "world-writable directory: $(cat "$t/err")"
lib "$t/sticky/r.txt"
grep -q "^gpucap report" "$t/sticky/r.txt" || bad "sticky directory: no report $(cat "$t/err")"

touch "$t/mine" && chmod 600 "$t/mine"
lib "$t/mine"
grep -q "^gpucap report" "$t/mine" && [ "$(stat -c %a "$t/mine")" = 600 ] || bad "own report: $(stat -c %a "$t/mine")"
ls -A "$t" | grep -q '\.tmp$' && bad "a temporary file was left: $(ls -A "$t")"
[ $fail = 0 ] && echo "report file: no link followed, open directories refused"
exit $fail
