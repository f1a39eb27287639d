#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_usage.sh GPUCAP CLI_ALLOC [EXPORTER WEBHOOK [AGENT]]: the command line of gpucap's programs
# behaves like its neighbours': -V/--version; `help [CMD]` (and `help --help`; `help` for the
# programs without commands); a usage error is one
# line on stderr naming the program and pointing at --help, in one style for all three; `gpucap
# run` exits 125 for its own failures, 126/127 when CMD cannot be executed / is not found (env's
# convention); --json where a program reads the output; UUIDs where devices are named
# (--device-memory GPU-...=SIZE, one that no card has said); a placeholder for every flag that takes a value; the library
# search list names each place once.
set -u
gpucap=$1 alloc=$2 exporter=${3:-} webhook=${4:-} agent=${5:-}
. "$(dirname "$0")/../common.sh"

# --version and -V, for the three programs.
for prog in "$gpucap" $exporter $webhook $agent; do
    name=$(basename "$prog")
    [ "$name" = gpucap-cli ] && name=gpucap
    for v in -V --version; do
        out=$("$prog" $v 2>&1) && echo "$out" | grep -qE "^gpucap(-exporter|-webhook|-agent)? [0-9]+\.[0-9]+\.[0-9]+$" ||
            bad "$name $v: $out"
    done
done
# help, help CMD, help --help, CMD --help: usage on stdout, exit 0.
"$gpucap" help > "$t/h" && grep -q "^usage: gpucap COMMAND" "$t/h" || bad "gpucap help: $(head -2 "$t/h")"
"$gpucap" help --help > "$t/h" 2>&1 && grep -q "^usage: gpucap COMMAND" "$t/h" || bad "gpucap help --help: $(head -2 "$t/h")"
for cmd in run check doctor status inject plot; do
    "$gpucap" help $cmd > "$t/h" 2>&1 && grep -q "^usage: gpucap $cmd" "$t/h" || bad "gpucap help $cmd: $(head -2 "$t/h")"
done

# The programs without commands answer `help` as --help.
for prog in $exporter $webhook $agent; do
    name=$(basename "$prog")
    "$prog" help > "$t/h" 2>&1 && grep -q "^usage: $name" "$t/h" || bad "$name help: $(head -2 "$t/h")"
done

# One usage error style: exactly one line, "PROGRAM: ... (see 'PROGRAM --help')".
usage_error() { # WANT_RC PROGRAM_NAME ARGS...
    local want=$1 name=$2
    shift 2
    "$@" > "$t/out" 2> "$t/err" < /dev/null
    local rc=$?
    [ "$rc" = "$want" ] || bad "$*: exit $rc, want $want"
    [ "$(wc -l < "$t/err")" = 1 ] || bad "$*: not one line: $(cat "$t/err")"
    grep -q "^$name: .*(see '$name --help')$" "$t/err" || bad "$*: style: $(cat "$t/err")"
    [ -s "$t/out" ] && bad "$*: wrote on stdout: $(head -3 "$t/out")"
}
usage_error 2 gpucap "$gpucap" frobnicate
usage_error 2 gpucap "$gpucap" --frobnicate
usage_error 125 "gpucap run" "$gpucap" run --frobnicate -- true
usage_error 125 "gpucap run" "$gpucap" run --memory
usage_error 125 "gpucap run" "$gpucap" run --memory lots -- true
usage_error 125 "gpucap run" "$gpucap" run
usage_error 2 "gpucap status" "$gpucap" status --frobnicate
usage_error 2 "gpucap status" "$gpucap" status extra
usage_error 2 "gpucap check" "$gpucap" check --frobnicate
usage_error 2 "gpucap doctor" "$gpucap" doctor --frobnicate
usage_error 2 "gpucap plot" "$gpucap" plot
usage_error 2 "gpucap inject" "$gpucap" inject --to
[ -n "$exporter" ] && usage_error 2 gpucap-exporter "$exporter" --frobnicate
[ -n "$exporter" ] && usage_error 2 gpucap-exporter "$exporter" --root
[ -n "$webhook" ] && usage_error 2 gpucap-webhook "$webhook" --frobnicate
[ -n "$webhook" ] && usage_error 2 gpucap-webhook "$webhook" --threads
[ -n "$agent" ] && usage_error 2 gpucap-agent "$agent" --frobnicate
[ -n "$agent" ] && usage_error 2 gpucap-agent "$agent" --rounds
# gpucap's commands: a bad size operand is a usage error too.
usage_error 2 "gpucap set-memory" "$gpucap" set-memory --ledger "$t/none" 1XB
usage_error 2 "gpucap inject" "$gpucap" inject --to "$t/inj" c=1XB
usage_error 2 "gpucap inject" "$gpucap" inject --to "$t/inj" --max 1XB c=1GiB
# A bad value is a usage error in the same one-line style, for every kind of value (a number, a
# choice, a size, an address, a card source), the required flags given.
if [ -n "$webhook" ]; then
    for bad_value in "--threads x" "--threads 0" "--preload bogus" "--default-memory 1XB" "--listen bogus" \
        "--namespace-annotations maybe" "--driver-limits-label="; do
        usage_error 2 gpucap-webhook "$webhook" --cert c --key k --image i $bad_value
    done
fi
if [ -n "$exporter" ]; then
    usage_error 2 gpucap-exporter "$exporter" --listen bogus
    usage_error 2 gpucap-exporter "$exporter" --cards bogus
fi
if [ -n "$agent" ]; then
    usage_error 2 gpucap-agent "$agent" --node n --watch-timeout x
    usage_error 2 gpucap-agent "$agent" --node n --watch-timeout 0
fi

# gpucap run: 125 for gpucap's own failure, 126 / 127 for CMD's, as env(1).
"$gpucap" run --lib /nonexistent/libgpucap.so -- true 2> "$t/err"; rc=$?
[ $rc = 125 ] || bad "--lib /nonexistent: exit $rc, want 125 ($(cat "$t/err"))"
"$gpucap" run -- "$t/nonexistent" 2> /dev/null; rc=$?
[ $rc = 127 ] || bad "CMD not found: exit $rc, want 127"
printf 'not a program\n' > "$t/plain" && chmod 644 "$t/plain"
"$gpucap" run -- "$t/plain" 2> /dev/null; rc=$?
[ $rc = 126 ] || bad "CMD not executable: exit $rc, want 126"
"$gpucap" run -- sh -c 'exit 3'; rc=$?
[ $rc = 3 ] || bad "CMD's status: exit $rc, want 3"

# The library search list names each place once: a copy of gpucap where no library is.
mkdir -p "$t/bin" && cp "$gpucap" "$t/bin/gpucap"
env -u GPUCAP_LIB "$t/bin/gpucap" run -- true 2> "$t/err"
list=$(sed -n 's/.*looked at \(.*\)); pass.*/\1/p' "$t/err")
[ -n "$list" ] || bad "no search list: $(cat "$t/err")"
dups=$(echo "$list" | tr ',' '\n' | sed 's/^ *//' | sort | uniq -d)
[ -z "$dups" ] || bad "the search list repeats $dups: $list"

# --json wherever a program reads the output: run's report, status, check, doctor.
"$gpucap" run --json --report - -- "$alloc" a1 F 2> /dev/null | python3 -c 'import json,sys; json.load(sys.stdin)' ||
    bad "run --json --report -"
GPUCAP_LEDGER=$t/ledger LD_PRELOAD=$TEST_PRELOAD "$alloc" a1 > /dev/null 2>&1
"$gpucap" status --json --ledger "$t/ledger" | python3 -c 'import json,sys; json.load(sys.stdin)' || bad "status --json"
"$gpucap" check --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"] in (True, False)' ||
    bad "check --json"
"$gpucap" doctor --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["checks"]' || bad "doctor --json"

# UUIDs wherever devices are named: --device-memory GPU-<uuid>=SIZE is the device's budget.
uuid=$("$gpucap" run --json --report - -- "$alloc" a1 F 2> /dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["uuid"])')
case $uuid in GPU-*) ;; *) bad "no uuid: $uuid" ;; esac
"$gpucap" run --device-memory "$uuid=32MiB" -- "$alloc" a33 > "$t/out" 2> "$t/err"; rc=$?
[ $rc = 0 ] && grep -q "results=1$" "$t/out" || bad "--device-memory UUID=32MiB: rc $rc $(cat "$t/out" "$t/err")"
"$gpucap" run --device-memory "${uuid:0:12}=32MiB" -- "$alloc" a33 > "$t/out" 2>&1
grep -q "results=1$" "$t/out" || bad "--device-memory UUID-prefix=32MiB: $(cat "$t/out")"
usage_error 125 "gpucap run" "$gpucap" run --device-memory "GPU-zz=1GiB" -- true
# A UUID that no card here has is said, not silently a budget for nothing; the card's own is not.
"$gpucap" run --device-memory "GPU-00000000=32MiB" -- true > /dev/null 2> "$t/err" || bad "unknown UUID: rc $?"
grep -q "warning: --device-memory GPU-00000000: no card here" "$t/err" || bad "unknown UUID not said: $(cat "$t/err")"
"$gpucap" run --device-memory "${uuid:0:12}=32MiB" -- true > /dev/null 2> "$t/err"
[ -s "$t/err" ] && bad "the card's UUID: $(cat "$t/err")"

# A placeholder for every flag that takes a value: no "--flag" line in any help lacks one where
# the flag needs a value (getopt says which: a missing value is "needs a value").
check_placeholders() { # NAME HELP_COMMAND...
    local name=$1
    shift
    "$@" --help > "$t/help" 2>&1 || bad "$name --help"
    for flag in $(grep -oE '^  (-[a-zA-Z], )?--[a-z-]+' "$t/help" | grep -oE -- '--[a-z-]+' | sort -u); do
        [ "$flag" = --help ] || [ "$flag" = --version ] && continue
        "$@" "$flag" < /dev/null > /dev/null 2> "$t/err"
        if grep -q "needs a value" "$t/err"; then
            grep -qE -- "$flag [A-Z<a-z|]" "$t/help" || bad "$name $flag: no placeholder in: $(grep -- "$flag" "$t/help")"
        fi
    done
}
check_placeholders "gpucap run" "$gpucap" run
check_placeholders "gpucap status" "$gpucap" status
check_placeholders "gpucap doctor" "$gpucap" doctor
check_placeholders "gpucap plot" "$gpucap" plot
check_placeholders "gpucap inject" "$gpucap" inject
[ -n "$exporter" ] && check_placeholders gpucap-exporter "$exporter"
[ -n "$webhook" ] && check_placeholders gpucap-webhook "$webhook"
[ -n "$agent" ] && check_placeholders gpucap-agent "$agent"
exit $fail
