#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_nsapi.sh TEST_NSAPI ADMISSION_CLI: the platform's per-namespace policy from Namespace
# annotations, read through a fake API server (fake_apiserver.py) on loopback over TLS with a
# throwaway CA: test_nsapi.c checks the lookups and the cache; then the handler with that policy
# denies an annotation above the namespace maximum (naming both) and applies the namespace default.
# Exit 0 pass, 1 fail, 77 without openssl.
set -u
tnsapi=$1 cli=$2
HERE=$(cd "$(dirname "$0")" && pwd)
command -v openssl >/dev/null || { echo "openssl missing; skipping"; exit 77; }
. "$(dirname "$0")/../common.sh"

for ca in ca other; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$ca" \
        -keyout "$t/$ca.key" -out "$t/$ca.crt" 2>/dev/null || { echo "FAIL cannot make a CA"; exit 1; }
done
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kubernetes \
    -keyout "$t/api.key" -out "$t/api.csr" 2>/dev/null &&
openssl x509 -req -in "$t/api.csr" -CA "$t/ca.crt" -CAkey "$t/ca.key" -set_serial 7 -days 1 \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1\n') -out "$t/api.crt" 2>/dev/null || { echo "FAIL cert"; exit 1; }
echo "test-token-$$" > "$t/token"
echo "stolen" > "$t/badtoken"

start() {
    rm -f "$t/port"
    /usr/bin/python3 "$HERE/fake_apiserver.py" "$t/port" "$t/api.crt" "$t/api.key" "test-token-$$" &
    PID=$!
    waitfor test -s "$t/port" || { echo "FAIL the fake API server did not start"; exit 1; }
    URL=https://127.0.0.1:$(cat "$t/port")
}

start
"$tnsapi" "$URL" "$t/token" "$t/ca.crt" "$t/other.crt" "$t/badtoken" "$PID" || fail=1
wait "$PID" 2>/dev/null
start
api=(--kube-api "$URL" --kube-token "$t/token" --kube-ca "$t/ca.crt" --image gpucap:t)
out=$("$cli" "${api[@]}" < "$HERE/fixtures/annotated-bare.json" 2>/dev/null | tail -1)
case "$out" in
    *'"allowed":false'*'8GiB'*'above the maximum 4GiB (namespace policy)'*) ;;
    *) bad "annotation 8GiB in namespace ml (max 4GiB): $out" ;;
esac
out=$("$cli" "${api[@]}" --default-memory 25% < "$HERE/fixtures/default-budget.json" 2>&1 >/dev/null)
case "$out" in *"containers=train=2GiB max=4GiB"*) ;; *) bad "namespace default 2GiB: $out" ;; esac
# Both sources: the policy file, where it says something, wins over the annotations.
printf '[ml]\nmax_memory = 3GiB\n' > "$t/policy.ini"
out=$("$cli" "${api[@]}" --namespace-policy "$t/policy.ini" < "$HERE/fixtures/default-budget.json" 2>&1 >/dev/null)
case "$out" in *"containers=train=2GiB max=3GiB"*) ;; *) bad "file max 3GiB with the annotations' default: $out" ;; esac
# The API unreachable and nothing cached: denied, never uncapped.
kill "$PID"; wait "$PID" 2>/dev/null
out=$("$cli" "${api[@]}" < "$HERE/fixtures/annotated-bare.json" 2>/dev/null | tail -1)
case "$out" in
    *'"allowed":false'*'"code":503'*'policy of namespace ml cannot be read now'*'retry later'*) ;;
    *) bad "API down: not a 503 that says retry: $out" ;;
esac
[ $fail = 0 ] && echo "ok: namespace policy through the API"
exit $fail
