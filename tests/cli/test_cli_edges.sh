#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_edges.sh GPUCAP CLI_ALLOC: what a new user meets first: help texts (no "%%", the settings
# table only in `gpucap --help`), a bad --memory named once, a broken "[gpucap" line reported as a
# syntax error, `gpucap check FILE` of a missing file, per-device keys shown with their section,
# audit mode's one line per process plus a summary with the budget that would have sufficed, and
# --version/--help-man and the version check of `gpucap doctor`.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
clean() { env -u GPUCAP_MEMORY_LIMIT -u GPUCAP_CONFIG -u GPUCAP_LEDGER -u GPUCAP_MODE "$@" > "$t/out" 2> "$t/err"; }

# Help: printf-style "%%" never reaches the user; subcommands point at the table instead of repeating it.
"$gpucap" run --help > "$t/h" || bad "run --help failed"
grep -q '%%' "$t/h" && bad "run --help prints %%: $(grep '%%' "$t/h")"
grep -q 'budget of 100% of each device' "$t/h" || bad "run --help: the 100% budget"
for c in run check doctor status; do
    "$gpucap" $c --help > "$t/h" 2>&1
    grep -q GPUCAP_LEDGER_GROUP "$t/h" && bad "$c --help repeats the settings table"
    grep -q 'gpucap --help' "$t/h" || bad "$c --help does not say where the settings are"
done
"$gpucap" --help | grep -q GPUCAP_LEDGER_GROUP || bad "gpucap --help lacks the settings table"
"$gpucap" --help | grep -q 'memory_limit in \[gpucap\], \[device.<ordinal>\], \[device.GPU-<uuid>\]' ||
    bad "gpucap --help: per-device ini sections"
"$gpucap" --help-man > "$t/man" || bad "--help-man failed"
grep -q '^\.TH GPUCAP 1' "$t/man" && grep -q 'GPUCAP_LEDGER_GROUP' "$t/man" || bad "man page: $(head -3 "$t/man")"
"$gpucap" --version | grep -qE '^gpucap [0-9]+\.[0-9]+\.[0-9]+$' || bad "--version: $("$gpucap" --version)"
"$gpucap" doctor 2>&1 | grep -q "^PASS  version: the library and this command are $("$gpucap" --version)$" ||
    bad "doctor: versions: $("$gpucap" doctor 2>&1 | grep version)"

# A bad size names the option and says "not a size" once.
clean "$gpucap" run --memory 2gigs -- true; rc=$?
[ $rc = 125 ] || bad "--memory 2gigs: rc $rc"
grep -q "^gpucap run: --memory: '2gigs' is not a size; accepted: " "$t/err" || bad "--memory 2gigs: $(cat "$t/err")"
grep -q "(not a size)" "$t/err" && bad "--memory 2gigs says it twice: $(cat "$t/err")"
clean "$gpucap" run --device-memory 1=lots -- true
grep -q "^gpucap run: --device-memory: 'lots' is not a size" "$t/err" || bad "--device-memory: $(cat "$t/err")"

# "[gpucap" without "]" is a syntax error on line 1, not an unknown section [] on line 2.
printf '[gpucap\nmemory_limit = 1GiB\n' > "$t/syntax.ini"
clean "$gpucap" check "$t/syntax.ini"; rc=$?
[ $rc = 1 ] || bad "[gpucap: rc $rc"
grep -q "$t/syntax.ini:1: syntax error" "$t/err" || bad "[gpucap: $(cat "$t/err")"
grep -q "unknown section" "$t/err" && bad "[gpucap reported as an unknown section: $(cat "$t/err")"
grep -qE "^  all devices +0 \(every allocation denied" "$t/out" || bad "[gpucap: not the safe state"
printf 'memory_limit = 1GiB\n[gpucap]\n' > "$t/orphan.ini"
clean "$gpucap" check "$t/orphan.ini"; rc=$?
[ $rc = 1 ] && grep -q "$t/orphan.ini:1: key 'memory_limit' before any section" "$t/err" ||
    bad "key before any section: rc $rc $(cat "$t/err")"

# A missing FILE argument is named as the argument; GPUCAP_CONFIG naming one is not "not present".
clean "$gpucap" check "$t/missing.ini"; rc=$?
[ $rc = 1 ] || bad "check missing.ini: rc $rc"
grep -q "^gpucap check: $t/missing.ini cannot be read (No such file or directory)$" "$t/err" ||
    bad "check missing.ini: $(cat "$t/err")"
grep -q "GPUCAP_CONFIG" "$t/err" && bad "check missing.ini names GPUCAP_CONFIG: $(cat "$t/err")"
clean GPUCAP_CONFIG="$t/missing.ini" "$gpucap" check; rc=$?
[ $rc = 1 ] || bad "GPUCAP_CONFIG=missing: rc $rc"
grep -q "not present" "$t/out" && bad "GPUCAP_CONFIG=missing says 'not present': $(cat "$t/out")"
grep -q "^config file: $t/missing.ini (cannot be read" "$t/out" || bad "GPUCAP_CONFIG=missing: $(cat "$t/out")"

# Per-device keys carry their section.
printf '[gpucap]\nmemory_limit = 8GiB\n[device.1]\nmemory_limit = 2GiB\n[device.GPU-fa4ec0da]\nmemory_limit = 1GiB\n' \
    > "$t/dev.ini"
clean "$gpucap" check "$t/dev.ini" || bad "dev.ini: $(cat "$t/err")"
grep -qE "^  \[device\.1\] memory_limit += 2GiB +$t/dev.ini:4$" "$t/out" || bad "[device.1] key: $(cat "$t/out")"
grep -qE "^  \[device\.GPU-fa4ec0da\] memory_limit += 1GiB +$t/dev.ini:6$" "$t/out" || bad "[device.GPU-] key"

# Audit mode: 6 x 32 MiB under 32 MiB: one would-be denial line, then the summary at exit with the
# peak; the report says the same budget would have sufficed.
export FAKECUDA_CTX_BYTES=0
clean "$gpucap" run --audit --memory 32MiB --report "$t/r.txt" -- "$alloc" a32 a32 a32 a32 a32 a32 F
grep -q "results=000000$" "$t/out" || bad "audit denied: $(cat "$t/out" "$t/err")"
[ "$(grep -c 'would be denied' "$t/err")" = 1 ] || bad "audit: not one line: $(cat "$t/err")"
grep -q "audit: 5 allocations on device 0 would have been denied under the limit 32.00 MiB; a budget of 192.00 MiB" \
    "$t/err" || bad "audit summary: $(cat "$t/err")"
grep -qE "^  sufficient +192.00 MiB \($((192 * MiB)) bytes\)" "$t/r.txt" || bad "report: $(cat "$t/r.txt")"
# Enforce mode still logs each denial (of each request: the same one asked again at once is one
# denial, cli.denials).
clean "$gpucap" run --memory 32MiB -- "$alloc" a32 a40 a48
[ "$(grep -c 'denied on device 0' "$t/err")" = 2 ] || bad "enforce lines: $(cat "$t/err")"
grep -q "would have been denied" "$t/err" && bad "enforce mode printed an audit summary"
exit $fail
