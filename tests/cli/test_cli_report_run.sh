#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_report_run.sh GPUCAP CLI_ALLOC: the report of `gpucap run` as a machine reads it and as
# it should read: `--report -` is stdout holding the report alone (CMD's own stdout goes to
# stderr, the library's log lines stay on stderr), `--report-fd N` a descriptor CMD does not
# inherit; the report names the command, its exit status or signal, the wall time and the version,
# in text and JSON alike; its figures mean what they say: the peak and the allocations are what
# the driver carried out (a request the driver refused is a driver refusal, not in the peak nor
# an allocation nor a free), context reserves are apart (not the largest request), frees are
# counted; in audit mode the program is told the card, so a job that sizes itself from what it is
# told shows what it takes on the card.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
export FAKECUDA_CTX_BYTES=0
j() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# --report - with --json: stdout is one JSON document although CMD prints on its stdout and the
# library warns on stderr (here: a denial).
"$gpucap" run --json --report - -- "$alloc" a40 a40 F > "$t/out" 2> "$t/err"; rc=$?
[ $rc = 0 ] || bad "run: rc $rc $(cat "$t/err")"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$t/out" || bad "stdout is not the report alone: $(cat "$t/out")"
grep -q "results=01" "$t/err" || bad "CMD's stdout not on stderr: $(cat "$t/err")"
grep -q "denied on device 0" "$t/err" || bad "log line: $(cat "$t/err")"
grep -q '"command":\[' "$t/out" || bad "no command in $(cat "$t/out")"
# The run's facts.
[ "$(j "$t/out" "d['command'][1:]")" = "['a40', 'a40', 'F']" ] || bad "command: $(j "$t/out" "d['command']")"
[ "$(j "$t/out" "d['exit']['status'], d['exit']['signal']")" = "(0, None)" ] || bad "exit: $(j "$t/out" "d['exit']")"
j "$t/out" "d['wall_seconds']" | grep -qE '^[0-9]+\.[0-9]+$' || bad "wall_seconds: $(cat "$t/out")"
[ "$(j "$t/out" "d['version']")" = "$("$gpucap" --version | cut -d' ' -f2)" ] || bad "version"

# --report-fd 3: the report there, CMD without descriptor 3.
"$gpucap" run --json --report-fd 3 -- sh -c 'if [ -e /proc/self/fd/3 ]; then echo leaked; fi; exit 4' \
    3> "$t/fd.json" > "$t/out" 2>&1; rc=$?
[ $rc = 4 ] || bad "--report-fd: rc $rc"
grep -q leaked "$t/out" && bad "CMD inherited the report's descriptor"
[ "$(j "$t/fd.json" "d['exit']['status']")" = 4 ] || bad "--report-fd exit status: $(cat "$t/fd.json")"
"$gpucap" run --report-fd 97 -- true 2> "$t/err"; rc=$?
[ $rc = 125 ] && grep -q "not an open file descriptor" "$t/err" || bad "--report-fd 97: rc $rc $(cat "$t/err")"

# A descriptor on stdout's file (--report-fd 1, 3>&1, /dev/stdout) is stdout as '-' is: CMD's own
# stdout goes to stderr, so a pipe to jq reads the report alone. /dev/stderr and /dev/fd/N are
# descriptors, not files to replace.
for how in "--report-fd 1" "--report-fd 3" "--report /dev/stdout" "--report /dev/fd/3"; do
    "$gpucap" run --json $how -- "$alloc" a40 F > "$t/out" 3>&1 2> /dev/null; rc=$?
    [ $rc = 0 ] || bad "$how: rc $rc"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$t/out" 2> /dev/null || bad "$how: stdout is not the report alone: $(cat "$t/out")"
done
"$gpucap" run --json --report /dev/stderr -- "$alloc" a40 F 2> "$t/err" > /dev/null; rc=$?
[ $rc = 0 ] && grep -q '"command":\[' "$t/err" || bad "--report /dev/stderr: rc $rc $(cat "$t/err")"
"$gpucap" run --report /dev/fd/97 -- true 2> "$t/err"; rc=$?
[ $rc = 125 ] && grep -q "descriptor 97 is not open" "$t/err" || bad "--report /dev/fd/97: rc $rc $(cat "$t/err")"
# A report file that cannot be written is gpucap's failure (125) before CMD runs, not after its work.
"$gpucap" run --report "$t/no/such/dir/r.json" -- touch "$t/ran" 2> "$t/err"; rc=$?
[ $rc = 125 ] || bad "unwritable report: rc $rc"
[ -e "$t/ran" ] && bad "CMD ran although its report could not be written"
grep -q "cannot be written to $t/no/such/dir/r.json" "$t/err" || bad "unwritable report: $(cat "$t/err")"
ln -s "$t/elsewhere" "$t/link.json"
"$gpucap" run --report "$t/link.json" -- touch "$t/ran" 2> /dev/null; rc=$?
[ $rc = 125 ] && [ ! -e "$t/ran" ] || bad "report through a link: rc $rc, CMD ran: $([ -e "$t/ran" ] && echo yes)"

# A signal: the report says which, and gpucap dies of it too.
"$gpucap" run --json --report "$t/sig.json" -- sh -c 'kill -KILL $$' 2> /dev/null; rc=$?
[ $rc = 137 ] || bad "killed: rc $rc"
[ "$(j "$t/sig.json" "d['exit']['signal'], d['exit']['signal_name'], d['exit']['status']")" = "(9, 'SIGKILL', None)" ] ||
    bad "signal in the JSON: $(cat "$t/sig.json")"
"$gpucap" run --report - -- sh -c 'kill -TERM $$' > "$t/sig.txt" 2> /dev/null
grep -qE "^exit +killed by signal 15 \(SIGTERM\)$" "$t/sig.txt" || bad "signal in the text: $(cat "$t/sig.txt")"

# Text and JSON say the same things: every figure of the JSON device is a line of the text, with
# the same value.
GPUCAP_CONTEXT_RESERVE=8MiB FAKECUDA_MEM=1GiB "$gpucap" run --audit --memory 64MiB --json --report "$t/a.json" -- \
    "$alloc" a32 a32 a2000 a1 > /dev/null 2>&1
GPUCAP_CONTEXT_RESERVE=8MiB FAKECUDA_MEM=1GiB "$gpucap" run --audit --memory 64MiB --report "$t/a.txt" -- \
    "$alloc" a32 a32 a2000 a1 > /dev/null 2>&1
for pair in "peak:peak" "in use at end:in_use" "held at exit:held_at_exit" "allocations:allocations" "frees:frees" \
    "denials:denials" "driver refusals:driver_refusals" "context reserves:context_reserves" \
    "largest request:largest" "sufficient:sufficient"; do
    label=${pair%%:*} key=${pair#*:}
    want=$(j "$t/a.json" "d['devices'][0]['$key']")
    line=$(grep -E "^  $label " "$t/a.txt")
    echo "$line" | grep -qE "^  $label +([0-9.]+ [KMGT]?i?B \()?$want( bytes\))?([ :(].*)?$" ||
        bad "text '$label' vs JSON $key=$want: '$line'"
done
for label in command exit "wall time" mode; do
    grep -qE "^$label " "$t/a.txt" || bad "text lacks '$label': $(head -5 "$t/a.txt")"
done
# Audit mode enforces nothing: the report says so, and does not name gpucap as the enforcer.
[ "$(j "$t/a.json" "d['devices'][0]['enforced_by']")" = none ] ||
    bad "audit JSON enforced_by: $(j "$t/a.json" "d['devices'][0]['enforced_by']")"
grep -qE "^  enforced by +none \(audit mode: gpucap denied nothing\)$" "$t/a.txt" ||
    bad "audit text: $(grep 'enforced by' "$t/a.txt")"

# The figures. Audit, a 1 GiB card, 8 MiB context reserve: 32 + 32 admitted, 2000 MiB refused by
# the driver (more than the card), 1 admitted. Peak: 8 + 65 MiB; 3 allocations; 1 driver refusal.
[ "$(j "$t/a.json" "d['devices'][0]['peak']")" = $((73 * MiB)) ] || bad "audit peak: $(cat "$t/a.json")"
[ "$(j "$t/a.json" "d['devices'][0]['allocations']")" = 3 ] || bad "allocations: $(cat "$t/a.json")"
[ "$(j "$t/a.json" "d['devices'][0]['driver_refusals']")" = 1 ] || bad "driver refusals: $(cat "$t/a.json")"
[ "$(j "$t/a.json" "d['devices'][0]['frees']")" = 0 ] || bad "a refused request is no free: $(cat "$t/a.json")"
[ "$(j "$t/a.json" "d['devices'][0]['context_reserves']")" = 1 ] || bad "context reserves: $(cat "$t/a.json")"
# The largest request is a request, not the context reserve.
GPUCAP_CONTEXT_RESERVE=256MiB "$gpucap" run --audit --json --report "$t/l.json" -- "$alloc" a1 a1 F > /dev/null 2>&1
[ "$(j "$t/l.json" "d['devices'][0]['largest']")" = $MiB ] || bad "largest: $(cat "$t/l.json")"
[ "$(j "$t/l.json" "d['devices'][0]['allocations'], d['devices'][0]['frees']")" = "(2, 2)" ] ||
    bad "allocations and frees: $(cat "$t/l.json")"
# Frees of what was allocated, and what was still held when the process exited.
"$gpucap" run --json --report "$t/f.json" -- "$alloc" a8 a8 F a4 > /dev/null 2>&1
[ "$(j "$t/f.json" "d['devices'][0]['frees'], d['devices'][0]['held_at_exit'], d['devices'][0]['in_use']")" = \
    "(2, $((4 * MiB)), 0)" ] || bad "frees, held at exit: $(cat "$t/f.json")"
# A context's reserve is no allocation left behind: held at exit is the allocations alone (here a
# parent and its child, each with a context of 8 MiB; then a program that freed everything).
GPUCAP_CONTEXT_RESERVE=8MiB "$gpucap" run --json --report "$t/h.json" -- "$alloc" a8 c:a4,a2 > /dev/null 2>&1
[ "$(j "$t/h.json" "d['devices'][0]['held_at_exit'], d['devices'][0]['context_reserves']")" = "($((14 * MiB)), 2)" ] ||
    bad "held at exit with context reserves: $(cat "$t/h.json")"
GPUCAP_CONTEXT_RESERVE=8MiB "$gpucap" run --report "$t/h.txt" -- "$alloc" a8 F > /dev/null 2>&1
grep -qE "^  held at exit +0 B" "$t/h.txt" || bad "a program that freed everything: $(cat "$t/h.txt")"
# A budget for one device leaves the others measured (under 100% of themselves): the report has
# every device the job used, whether its budget came from -d or from GPUCAP_MEMORY_LIMIT_<N>.
for how in "-d 1=64MiB" "--device-memory=1=64MiB"; do
    env -u GPUCAP_MEMORY_LIMIT FAKECUDA_DEVICES=2 "$gpucap" run $how --json --report "$t/two.json" -- "$alloc" a8 d1 a16 > /dev/null 2>&1
    [ "$(j "$t/two.json" "[(x['index'], x['budget'], x['peak']) for x in d['devices']]")" = \
        "[(0, $((1024 * MiB)), $((8 * MiB))), (1, $((64 * MiB)), $((16 * MiB)))]" ] || bad "$how: $(cat "$t/two.json")"
done
env -u GPUCAP_MEMORY_LIMIT FAKECUDA_DEVICES=2 GPUCAP_MEMORY_LIMIT_1=64MiB "$gpucap" run --json --report "$t/two.json" -- \
    "$alloc" a8 d1 a16 > /dev/null 2>&1
[ "$(j "$t/two.json" "len(d['devices'])")" = 2 ] || bad "GPUCAP_MEMORY_LIMIT_1: $(cat "$t/two.json")"
# The same figures as the fake driver's own record.
FAKECUDA_RECORD=$t/record "$gpucap" run --json --report "$t/p.json" -- "$alloc" a16 a30 a30 F p > "$t/out" 2>&1
grep -q "fake peak=$((46 * MiB)) allocs=2 frees=2" "$t/out" || bad "the fake's record: $(cat "$t/out")"
[ "$(j "$t/p.json" "d['devices'][0]['peak'], d['devices'][0]['allocations'], d['devices'][0]['denials']")" = \
    "($((46 * MiB)), 2, 1)" ] || bad "enforce figures: $(cat "$t/p.json")"

# Audit mode tells the program the card: a job that takes half of what it is told takes half the
# card, and the peak says so (not half the budget).
"$gpucap" run --audit --memory 64MiB -- "$alloc" i > "$t/out" 2> /dev/null
grep -q "info free=$((1024 * MiB)) total=$((1024 * MiB))" "$t/out" || bad "audit: told $(cat "$t/out")"
"$gpucap" run --memory 64MiB -- "$alloc" i > "$t/out" 2> /dev/null
grep -q "total=$((64 * MiB))" "$t/out" || bad "enforce: told $(cat "$t/out")"
"$gpucap" run --audit --memory 64MiB --json --report "$t/s.json" -- "$alloc" f50 > /dev/null 2>&1
[ "$(j "$t/s.json" "d['devices'][0]['peak']")" = $((512 * MiB)) ] || bad "self-sizing job's peak: $(cat "$t/s.json")"
# A signal after CMD ended (the report's descriptor is a full pipe nobody reads) ends gpucap as
# any program: no handler left that forwards it to a CMD that is gone.
exec 4> >(exec sleep 20 > /dev/null 2>&1)
reader=$!
head -c 65536 /dev/zero >&4
timeout -s KILL 8 "$gpucap" run --report-fd 4 -- true 2> /dev/null &
p=$!
sleep 1
kill -TERM $p
wait $p; rc=$?
exec 4>&-
kill $reader 2> /dev/null
[ $rc = 143 ] || bad "SIGTERM while the report is written: rc $rc (137: it ignored the signal until killed)"
exit $fail
