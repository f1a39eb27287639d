#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_check_more.sh GPUCAP CLI_ALLOC: `gpucap check` checks the whole file: an unknown section
# is said once and the keys in it are still checked (a bad value there, and everything after it);
# an unknown key, section or variable comes with the nearest known name ("did you mean"; where the
# key is: a device's section, a variable's name as a key); a file
# given as the argument is named as such, not as GPUCAP_CONFIG; --json carries the same, every
# budget the text lists included (each device's, by ordinal or UUID, with its origin).
set -u
gpucap=$1
. "$(dirname "$0")/../common.sh"

printf '[gpucap]\nmemory_limt = 1GiB\n[gpcap]\nmode = audti\nlog_level = info\n[gpucap]\nlog_levl = info\nfail_after = x\n' \
    > "$t/c.ini"
"$gpucap" check "$t/c.ini" > "$t/out" 2> "$t/err"; rc=$?
[ $rc = 1 ] || bad "rc $rc"
grep -q "c.ini:2: unknown key 'memory_limt' in \[gpucap\]; did you mean 'memory_limit'?" "$t/err" ||
    bad "did you mean memory_limit: $(cat "$t/err")"
[ "$(grep -c "unknown section \[gpcap\]" "$t/err")" = 1 ] || bad "unknown section said once: $(cat "$t/err")"
grep -q "unknown section \[gpcap\].*did you mean 'gpucap'?" "$t/err" || bad "did you mean gpucap: $(cat "$t/err")"
grep -q "c.ini:4: mode = 'audti' is not valid" "$t/err" || bad "a bad value in an unknown section: $(cat "$t/err")"
grep -q "c.ini:7: unknown key 'log_levl' in \[gpucap\]; did you mean 'log_level'?" "$t/err" ||
    bad "after the unknown section: $(cat "$t/err")"
grep -q "c.ini:8: fail_after = 'x' is not valid" "$t/err" || bad "the last line: $(cat "$t/err")"
grep -q "^5 errors" "$t/out" || bad "count: $(tail -1 "$t/out")"
# The argument is named as the argument.
grep -qE "^  config +=.*c.ini +the command line$" "$t/out" || bad "argument named: $(grep config "$t/out")"
grep -q GPUCAP_CONFIG "$t/out" && bad "names GPUCAP_CONFIG: $(grep GPUCAP_CONFIG "$t/out")"
# A mistyped variable.
GPUCAP_MEMORY_LIMT=1GiB "$gpucap" check > /dev/null 2> "$t/err"
grep -q "GPUCAP_MEMORY_LIMT is not a gpucap setting; did you mean 'GPUCAP_MEMORY_LIMIT'?" "$t/err" ||
    bad "did you mean the variable: $(cat "$t/err")"
# Nothing near: no suggestion.
printf '[gpucap]\nzzzzzzzzzzzz = 1\n' > "$t/far.ini"
"$gpucap" check "$t/far.ini" > /dev/null 2> "$t/err"
grep -q "did you mean" "$t/err" && bad "a far-fetched suggestion: $(cat "$t/err")"
# --json: the same errors, valid JSON.
"$gpucap" check --json "$t/c.ini" > "$t/j" 2> "$t/err"; rc=$?
[ $rc = 1 ] || bad "--json rc $rc"
python3 - "$t/j" <<'PY' || bad "check --json: $(cat "$t/j")"
import json, sys
d = json.load(open(sys.argv[1]))
assert not d["ok"] and d["error_count"] == 5, d
assert any("did you mean 'memory_limit'" in e for e in d["errors"]), d["errors"]
assert d["config"]["from"] == "argument", d["config"]
PY

# The nearest name where the key is: a device's section suggests only what it takes and says where a
# [gpucap] key belongs; a variable's name written as a key suggests the key.
printf '[device.0]\nmemory_limt = 1GiB\nmode = audit\n[gpucap]\nGPUCAP_MEMORY_LIMIT = 1GiB\n' > "$t/k.ini"
"$gpucap" check "$t/k.ini" > /dev/null 2> "$t/err"
grep -q "k.ini:2: unknown key 'memory_limt' in \[device.0\]; did you mean 'memory_limit'?" "$t/err" || bad "device key: $(cat "$t/err")"
grep -q "k.ini:3: unknown key 'mode' in \[device.0\]; 'mode' is a setting of \[gpucap\]" "$t/err" ||
    bad "a [gpucap] key in a device section: $(cat "$t/err")"
grep -q "did you mean 'mode'" "$t/err" && bad "suggests the key it was given: $(cat "$t/err")"
grep -q "k.ini:5: unknown key 'GPUCAP_MEMORY_LIMIT' in \[gpucap\]; did you mean 'memory_limit'?" "$t/err" ||
    bad "a variable written as a key: $(cat "$t/err")"

# Every budget of the text is in the JSON, with the same origin.
printf '[gpucap]\nmemory_limit = 2GiB\n[device.0]\nmemory_limit = 1GiB\n[device.GPU-fa4ec0da-0000-4000-8000-000000000000]\nmemory_limit = 3GiB\n' \
    > "$t/d.ini"
env -u GPUCAP_MEMORY_LIMIT GPUCAP_MEMORY_LIMIT_1=50% "$gpucap" check "$t/d.ini" > "$t/text" 2>&1 || bad "check d.ini: $(cat "$t/text")"
env -u GPUCAP_MEMORY_LIMIT GPUCAP_MEMORY_LIMIT_1=50% "$gpucap" check --json "$t/d.ini" > "$t/d.json" 2>&1 || bad "check --json d.ini"
python3 - "$t/d.json" "$t/text" <<'PY' || bad "budgets in the JSON: $(cat "$t/d.json")"
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
got = {b["device"]: (b["budget"], b["bytes"], b["origin"]) for b in d["budget"]["devices"]}
ini = sys.argv[1][:-len("d.json")] + "d.ini"
want = {"all": ("2GiB", 2 << 30, ini + ":2"), "0": ("1GiB", 1 << 30, ini + ":4"),
        "1": ("50%", None, "GPUCAP_MEMORY_LIMIT_1"),
        "GPU-fa4ec0da-0000-4000-8000-000000000000": ("3GiB", 3 << 30, ini + ":6")}
assert got == want, got
for who, (_, _, origin) in want.items():
    line = {"all": "all devices", "0": "device 0", "1": "device 1"}.get(who, who)
    assert any(l.strip().startswith(line) and l.rstrip().endswith("from " + origin) for l in text.splitlines()), (who, text)
PY
# Every error of a file is said, each with its line: a syntax error hides neither those after it
# (a misspelt section, a misspelt key, a second syntax error) nor a key before any section.
printf 'stray\n[gpucap]\nmemory_limit = 1GiB\nthis is not ini\n[devcie.0]\nmemory_limit = 2GiB\n[gpucap]\nmemroy_limit = 3GiB\n[broken\n' \
    > "$t/e.ini"
env -u GPUCAP_MEMORY_LIMIT "$gpucap" check "$t/e.ini" > "$t/e.out" 2>&1; rc=$?
[ $rc = 1 ] || bad "a file with errors: rc $rc"
for want in "e.ini:1: syntax error" "e.ini:4: syntax error" "e.ini:5: unknown section \\[devcie.0\\]" \
    "e.ini:8: unknown key 'memroy_limit'" "e.ini:9: syntax error" "^5 errors: see the lines above"; do
    grep -q -- "$want" "$t/e.out" || bad "'$want' not said: $(cat "$t/e.out")"
done
exit $fail
