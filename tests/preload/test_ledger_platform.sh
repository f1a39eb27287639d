#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_ledger_platform.sh CASE ALLOC CLI PLATFORM_FILE: under the platform's lock the ledger is the
# platform's (gpucap inject --ledgers) and a tenant who removes, moves, links, chmods, truncates or
# replaces it gains nothing: the next process is denied every allocation, with one error line
# naming the file and the reason, instead of starting a fresh or private budget (issue 23). ALLOC is
# tests/lib/cli_alloc.c, run through the test copy of the library (TEST_PRELOAD_LOCK) whose platform
# file is PLATFORM_FILE. The ledger's directory here is writable by the test, as it would be for a
# tenant running as the init container's uid without the webhook's file mount; each case is one
# attack. Exit 77 where a case needs root (another uid, a file of another owner).
#   rm mv symlink chmod dir fifo truncate owner   the attack, then a new process: denied
#   hardlink socket chmod_narrow chmod_wide       the same, other spellings of it
#   shrunk     truncated under a running process: its next allocation is denied
#   otheruid   a process of another uid shares the budget (the ledger is 0666)
#   intact     the platform's ledger untouched: a process is capped by it, no error line
#   unlocked   without the lock, today's behaviour: a removed ledger is made again
#   renamed    the webhook's layout (the platform file and the ledger each a bind mount, in a mount
#              namespace of the test's): a tenant root renames the directory above the mounted ledger
#              and puts a valid ledger of its own (chowned to the platform's uid) in its place: denied
#   platform_renamed  the same layout with the preload list mounted too (PRELOAD_FILE, the test copy's
#              /etc/ld.so.preload): the directory above the platform file renamed and an unlocked file
#              of the tenant's put in its place: denied
set -u
case_=$1 alloc=$2 cli=$3 plat=$4
if { [ "$case_" = renamed ] || [ "$case_" = platform_renamed ]; } && [ -z "${GPC_IN_NS:-}" ]; then
    { [ "$(id -u)" = 0 ] && unshare -m true 2> /dev/null; } || { echo "needs root and a mount namespace; skipping"; exit 77; }
    GPC_IN_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
. "$(dirname "$0")/../common.sh"
trap 'cleanup; rm -rf "$plat"' EXIT
chmod 755 "$t"
mkdir -p "$(dirname "$plat")"
led="$t/led/c/gpucap.ledger"

mkdir -p "$t/vol" "$t/led"
"$cli" inject --to "$t/vol" --ledgers "$t/led" c=64MiB > /dev/null || { echo "FAIL gpucap inject"; exit 1; }
lock=true
[ "$case_" = unlocked ] && lock=false
printf '[gpucap]\nlock = %s\nmemory_limit = 64MiB\ncontext_reserve = 0\nledger = %s\n' "$lock" "$led" > "$plat"
chmod 644 "$plat"

# run [setpriv args] -- OPS...: cli_alloc with a clean environment; output in $t/out, $t/err.
run() {
    local pre=()
    while [ "$1" != "--" ]; do pre+=("$1"); shift; done
    shift
    timeout 20 "${pre[@]}" env -i PATH="$PATH" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" FAKECUDA_MEM=1GiB \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" LD_PRELOAD="$TEST_PRELOAD_LOCK" "$alloc" "$@" > "$t/out" 2> "$t/err"
}
# denied REASON: a new process is denied everything, and says why in one line naming the file.
denied() {
    run -- a1
    expect "$case_: denied" "^results=1$" out
    expect "$case_: one line naming the file and the reason" "^gpucap: error: ledger $led: $1; under the platform's lock" err
    [ "$(grep -c 'gpucap: error' "$t/err")" = 1 ] || { echo "FAIL $case_: not one error line"; cat "$t/err"; fail=1; }
}
need_root() { [ "$(id -u)" = 0 ] || { echo "needs root; skipping"; exit 77; }; }
# another valid ledger, made by the tenant (mode 0666 like the platform's)
tenant_ledger() { mkdir -p "$t/own/vol" "$t/own/led" && "$cli" inject --to "$t/own/vol" --ledgers "$t/own/led" x=1GiB > /dev/null && echo "$t/own/led/x/gpucap.ledger"; }

case $case_ in
intact)
    run -- a48 a32
    expect "intact: capped" "^results=01$" out
    [ -s "$t/err" ] && grep -q "gpucap: error" "$t/err" && { echo "FAIL intact: an error line"; cat "$t/err"; fail=1; }
    ;;
rm) rm -f "$led"; denied "is missing \(under the platform.s lock only the platform makes it: gpucap inject --ledgers\)" ;;
mv) mv "$led" "$t/elsewhere"; denied "is missing \(under the platform.s lock only the platform makes it: gpucap inject --ledgers\)"; [ -e "$led" ] && { echo "FAIL mv: the library made a ledger"; fail=1; } ;;
symlink) ln -sf "$(tenant_ledger)" "$led"; denied "is a symbolic link" ;;
chmod) chmod 0604 "$led"; denied "has mode 0604, the platform's ledger has mode 0666" ;;
dir) rm -f "$led"; mkdir "$led"; denied "is a directory" ;;
fifo) rm -f "$led"; mkfifo "$led"; denied "is not a regular file" ;;
truncate) truncate -s 100 "$led"; denied "truncated \(100 bytes, a ledger has [0-9]+\)" ;;
hardlink) ln "$led" "$t/led/c/second"; denied "has 2 names \(hard links\); a ledger must have one" ;;
socket) rm -f "$led"; python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$led"; denied "is not a regular file" ;;
chmod_narrow) chmod 0600 "$led"; denied "has mode 0600, the platform's ledger has mode 0666" ;;
chmod_wide) chmod 4777 "$led"; denied "has mode 4777, the platform's ledger has mode 0666" ;;
owner)
    need_root
    own=$(tenant_ledger) && chown 65534 "$own" && mv -f "$own" "$led"
    denied "belongs to uid 65534, not to the platform \(uid 0, the owner of the platform file\)"
    ;;
shrunk)
    # a8, then 2 s in which the ledger is truncated under it, then a8 again: denied.
    run -- a8 s20 a8 &
    holder=$!
    sleep 0.5
    truncate -s 0 "$led"
    wait "$holder"
    holder=
    expect "shrunk: the allocation after the truncation is denied" "^results=.1$" out
    expect "shrunk: said once" "under the platform's lock every allocation of this process is denied|ledger $led: truncated" err
    ;;
otheruid)
    need_root
    setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null || { echo "setpriv cannot switch uid; skipping"; exit 77; }
    # The build tree must be reachable by that uid (a checkout under a 0700 directory is not).
    for f in "$alloc" ${TEST_PRELOAD_LOCK//:/ }; do
        setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$f" -a -x "$(dirname "$f")" 2>/dev/null ||
            { echo "uid 65534 cannot reach $f; skipping"; exit 77; }
    done
    setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$alloc" 2>/dev/null ||
        { echo "uid 65534 cannot run $alloc; skipping"; exit 77; }
    # uid 65534 holds 48 MiB of the 64 MiB budget; this uid's 32 MiB must then be denied.
    timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH="$PATH" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" \
        FAKECUDA_MEM=1GiB ASAN_OPTIONS="${ASAN_OPTIONS:-}" LD_PRELOAD="$TEST_PRELOAD_LOCK" "$alloc" a48 s100 \
        > "$t/holder.out" 2> "$t/holder.err" &
    holder=$!
    # Once it holds them (a share is given back only when its process is dead, so a process of
    # this uid asking meanwhile could still hold its 32 MiB when the other one asks: wait first).
    for _ in $(seq 100); do
        "$cli" status --ledger "$led" --json 2> /dev/null | grep -q "\"in_use\":$((48 * MiB))" && break
        sleep 0.1
    done
    seen=0
    for _ in $(seq 60); do
        run -- a32
        grep -q "^results=1$" "$t/out" && { seen=1; break; }
        sleep 0.1
    done
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null
    holder=
    [ $seen = 1 ] || { echo "FAIL otheruid: uid 65534's 48 MiB and this uid's 32 MiB were both admitted under 64 MiB"; cat "$t/holder.err" "$t/err"; fail=1; }
    grep -q "gpucap: error" "$t/holder.err" && { echo "FAIL otheruid: the other uid could not use the ledger"; cat "$t/holder.err"; fail=1; }
    ;;
renamed)
    mnt="$t/run/gpucap/ledger/gpucap.ledger"
    mkdir -p "$(dirname "$mnt")" && : > "$mnt" && mount --bind "$led" "$mnt" || { echo "FAIL mounting the ledger"; exit 1; }
    printf '[gpucap]\nlock = true\nmemory_limit = 64MiB\ncontext_reserve = 0\nledger = %s\n' "$mnt" > "$plat"
    mount --bind "$plat" "$plat" || { echo "FAIL mounting the platform file"; exit 1; }
    run -- a48 a32
    expect "renamed: capped through the mounted ledger" "^results=01$" out
    mv "$t/run/gpucap" "$t/run/old" && mkdir -p "$t/run/gpucap/ledger" && mv "$(tenant_ledger)" "$mnt" ||
        { echo "FAIL the rename"; exit 1; }
    led=$mnt
    denied "is not the file the platform mounted \(no mount of its own, as the platform file is: a directory above it was replaced\)"
    umount "$t/run/old/ledger/gpucap.ledger" "$plat"
    ;;
platform_renamed)
    pre=${PRELOAD_FILE:?}
    mnt="$t/run/gpucap/ledger/gpucap.ledger"
    mkdir -p "$(dirname "$mnt")" "$(dirname "$pre")" && : > "$mnt" && : > "$pre" && mount --bind "$led" "$mnt" &&
        mount --bind "$pre" "$pre" || { echo "FAIL mounting"; exit 1; }
    printf '[gpucap]\nlock = true\nmemory_limit = 64MiB\ncontext_reserve = 0\nledger = %s\n' "$mnt" > "$plat"
    mount --bind "$plat" "$plat" || { echo "FAIL mounting the platform file"; exit 1; }
    run -- a48 a32
    expect "platform_renamed: capped through the mounted platform file" "^results=01$" out
    dir=$(dirname "$plat")
    umount "$plat" && mv "$dir" "$dir.old" && mount --bind "$dir.old/$(basename "$plat")" "$dir.old/$(basename "$plat")" &&
        mkdir -p "$dir" && printf '[gpucap]\nmemory_limit = 1GiB\ncontext_reserve = 0\n' > "$plat" || { echo "FAIL the rename"; exit 1; }
    run -- a100
    umount "$dir.old/$(basename "$plat")" "$pre" "$mnt"
    rm -rf "$dir" && mv "$dir.old" "$dir"
    expect "platform_renamed: denied" "^results=1$" out
    expect "platform_renamed: said" "gpucap: error: $plat is not the file the platform mounted \($pre is a mount of its own" err
    ;;
unlocked)
    rm -f "$led"
    run -- a1
    expect "unlocked: allowed" "^results=0$" out
    [ -f "$led" ] || { echo "FAIL unlocked: the ledger was not made again"; fail=1; }
    ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
[ $fail = 0 ] && echo "ok: $case_"
exit $fail
