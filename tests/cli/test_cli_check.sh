#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_check.sh GPUCAP: `gpucap check`: a valid file passes and shows each value's origin and
# the effective budget per device; bad values, unknown keys and bad syntax fail with the line
# number; the environment over the file; unknown GPUCAP_* variables; a bad fault rate.
set -u
gpucap=$1
. "$(dirname "$0")/../common.sh"
check() { env -u GPUCAP_MEMORY_LIMIT -u GPUCAP_CONFIG -u GPUCAP_LEDGER "$@" > "$t/out" 2> "$t/err"; }

printf '; budgets\n[gpucap]\nmemory_limit = 8GiB\nmode = audit\n[device.1]\nmemory_limit = 25%%\n' > "$t/ok.ini"
check "$gpucap" check "$t/ok.ini"; rc=$?
[ $rc = 0 ] || bad "valid file: rc $rc $(cat "$t/out" "$t/err")"
grep -qE "^  all devices +8.00 GiB \(8589934592 bytes\)  from $t/ok.ini:3$" "$t/out" || bad "all devices: $(cat "$t/out")"
grep -qE "^  device 1 +25% of the device  from $t/ok.ini:6$" "$t/out" || bad "percent: $(cat "$t/out")"
grep -qE "^  mode += audit +$t/ok.ini:4$" "$t/out" || bad "mode origin: $(cat "$t/out")"
grep -qE "^  log_level += warn +default$" "$t/out" || bad "default origin: $(cat "$t/out")"

check GPUCAP_MEMORY_LIMIT_1=2GiB "$gpucap" check "$t/ok.ini"
grep -qE "^  device 1 +2.00 GiB .* from GPUCAP_MEMORY_LIMIT_1$" "$t/out" || bad "env over file: $(cat "$t/out")"

printf '[gpucap]\n\nmemory_limit = 8 GiBs\n' > "$t/v.ini"
check "$gpucap" check "$t/v.ini"; rc=$?
[ $rc = 1 ] && grep -q "$t/v.ini:3: memory_limit = '8 GiBs' is not valid" "$t/err" || bad "bad value: rc $rc $(cat "$t/err")"
grep -qE "^  all devices +0 \(every allocation denied" "$t/out" || bad "bad value: safe state shown"
printf '[gpucap]\nmemory_limit = 8GiB\nmemroy_limit = 1GiB\n' > "$t/k.ini"
check "$gpucap" check "$t/k.ini"; rc=$?
[ $rc = 1 ] && grep -q "$t/k.ini:3: unknown key 'memroy_limit'" "$t/err" || bad "unknown key: rc $rc $(cat "$t/err")"
printf '[gpucap]\nmemory_limit = 8GiB\nthis is not ini\n' > "$t/s.ini"
check "$gpucap" check "$t/s.ini"; rc=$?
[ $rc = 1 ] && grep -q "$t/s.ini:3: syntax error: not an ini line" "$t/err" || bad "bad syntax: rc $rc $(cat "$t/err")"
printf '[gpucap]\nfail_rate = often\n' > "$t/r.ini"
check "$gpucap" check "$t/r.ini"; rc=$?
[ $rc = 1 ] && grep -q "$t/r.ini:2: fail_rate = 'often' is not valid" "$t/err" || bad "bad rate: rc $rc $(cat "$t/err")"
check "$gpucap" check "$t/missing.ini"; rc=$?
[ $rc = 1 ] && grep -q "cannot be read" "$t/err" || bad "missing file: rc $rc"
check GPUCAP_MEMORY_LIMT=1GiB "$gpucap" check "$t/ok.ini"; rc=$?
[ $rc = 1 ] && grep -q "GPUCAP_MEMORY_LIMT is not a gpucap setting" "$t/err" || bad "unknown variable: rc $rc"
check GPUCAP_MEMORY_LIMIT=1GiB "$gpucap" check; rc=$?
[ $rc = 0 ] && grep -qE "^  all devices +1.00 GiB .*from GPUCAP_MEMORY_LIMIT$" "$t/out" || bad "environment only: $(cat "$t/out")"
exit $fail
