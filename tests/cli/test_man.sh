#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_man.sh BUILD: the generated man pages (BUILD/man) as man(1) shows them: groff finds no error;
# the section-1 pages have NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXIT STATUS, ENVIRONMENT and FILES;
# every flag the programs' --help lists is in its page with its argument (the exporter's --once
# too); gpucap.ini(5) has a paragraph for every ini key `gpucap --help` lists, and its FILES.
set -u
build=$1
command -v groff > /dev/null || { echo "SKIP: groff is missing"; exit 77; }
fail=0
bad() { echo "FAIL $*" >&2; fail=1; }
text() { groff -man -Tutf8 -ww -Wbreak -z "$1" 2> "$1.warn"; [ -s "$1.warn" ] && bad "$1: groff: $(head -3 "$1.warn")";
         MANWIDTH=200 man -l "$1" 2> /dev/null | col -b; }
for page in gpucap.1 gpucap-webhook.1 gpucap-exporter.1 gpucap-agent.1 gpucap.ini.5; do
    f=$build/man/$page
    [ -f "$f" ] || { bad "$f is missing"; continue; }
    [ -f "$f.gz" ] || bad "$f.gz (installed) is missing"
    text "$f" > "$f.txt"
    want="NAME SYNOPSIS DESCRIPTION OPTIONS EXIT_STATUS ENVIRONMENT FILES"
    [ "$page" = gpucap.ini.5 ] && want="NAME SYNOPSIS DESCRIPTION KEYS ENVIRONMENT FILES"
    for s in $want SEE_ALSO; do
        grep -q "^${s//_/ }$" "$f.txt" || bad "$page: no ${s//_/ } section"
    done
    # SEE ALSO names every other page.
    for other in gpucap.1 gpucap-webhook.1 gpucap-exporter.1 gpucap-agent.1 gpucap.ini.5; do
        [ "$other" = "$page" ] && continue
        name=${other%.*} sect=${other##*.}
        sed -n '/^SEE ALSO$/,$p' "$f.txt" | grep -q "$name($sect)" || bad "$page: SEE ALSO lacks $name($sect)"
    done
done
# gpucap(1) shows what to type: an EXAMPLES section whose commands are gpucap's own commands.
sed -n '/^EXAMPLES$/,/^FILES$/p' "$build/man/gpucap.1.txt" > "$build/man/gpucap.examples"
[ "$(grep -c '^ *gpucap ' "$build/man/gpucap.examples")" -ge 5 ] || bad "gpucap(1): no EXAMPLES of at least five commands"
for cmd in $(sed -n 's/^ *gpucap \([a-z-]*\) .*/\1/p' "$build/man/gpucap.examples" | sort -u); do
    grep -q "^  $cmd " <("$build/tools/gpucap/gpucap" --help) || bad "gpucap(1) EXAMPLES: '$cmd' is not a command"
done
# Flags with their arguments, as tools/common's --help shows them ("  -x, --flag ARG  doc").
exporter=$build/tools/exporter/gpucap-exporter webhook=$build/tools/webhook/gpucap-webhook
if [ -x "$exporter" ]; then
    "$exporter" --help | sed -nE 's/^  (-[a-zA-Z], |    )(--[a-z-]+ [A-Z]+)( .*)?$/\2/p' > "$build/man/exporter.flags"
    [ -s "$build/man/exporter.flags" ] || bad "no flags in gpucap-exporter --help"
    while read -r flag; do
        grep -qF -- "$flag" "$build/man/gpucap-exporter.1.txt" || bad "gpucap-exporter(1) lacks '$flag'"
    done < "$build/man/exporter.flags"
    grep -q -- "^ *--once" "$build/man/gpucap-exporter.1.txt" || bad "gpucap-exporter(1) lacks --once"
fi
if [ -x "$webhook" ]; then
    for flag in $("$webhook" --help | sed -nE 's/^  (-[a-zA-Z], |    )(--[a-z-]+) .*/\2/p' | grep -v -e --help -e --version); do
        grep -qE -- "^ *$flag [A-Za-z|]+" "$build/man/gpucap-webhook.1.txt" || bad "gpucap-webhook(1) lacks '$flag ARG'"
    done
fi
# Every ini key of the options table, as `gpucap --help` lists them, in gpucap.ini(5).
for key in $("$build/tools/gpucap/gpucap" --help | sed -n 's/.*\[ini: \([a-z_]*\).*/\1/p'); do
    grep -qE "^ *$key " "$build/man/gpucap.ini.5.txt" || bad "gpucap.ini(5) lacks the key $key"
done
exit $fail
