#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tls_roundtrip.sh: gpucap-webhook over real TLS on loopback, with curl and openssl.
#
# usage: tls_roundtrip.sh PATH/TO/gpucap-webhook
# A throwaway CA signs a certificate for 127.0.0.1, laid out the way the kubelet mounts a Secret
# (tls.crt -> ..data/tls.crt, ..data -> a timestamped directory, swapped atomically). The server
# listens on a free port; curl checks /healthz, /mutate with a fixture, the 400/404/405/413 answers
# and 64 requests at once. Then the Secret is rotated and the server must present the new
# certificate (by SHA-256 fingerprint) without a restart; a mismatched pair must be refused while the
# previous certificate keeps serving. SIGTERM must stop it with status 0 (ASan checks leaks there).
# Exit 0 pass, 1 fail, 77 without openssl or curl.
set -u
WEBHOOK=${1:?usage: tls_roundtrip.sh PATH/TO/gpucap-webhook}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v openssl >/dev/null && command -v curl >/dev/null || { echo "openssl or curl missing; skipping"; exit 77; }

. "$(dirname "$0")/../common.sh"
fail() { echo "FAIL: $*"; echo "--- server log"; cat "$t/log"; exit 1; }

# A CA, and a server certificate (new key each time) in a new Secret directory named $1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=test-ca \
    -keyout "$t/ca.key" -out "$t/ca.crt" 2>/dev/null || fail "cannot make a CA"
issue() {
    local d="$t/secret/$1"
    mkdir -p "$d"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=gpucap-webhook \
        -keyout "$d/tls.key" -out "$d/req.csr" 2>/dev/null &&
    openssl x509 -req -in "$d/req.csr" -CA "$t/ca.crt" -CAkey "$t/ca.key" -set_serial "$2" -days 1 \
        -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n') -out "$d/tls.crt" 2>/dev/null ||
        fail "cannot issue a certificate"
}
publish() { # the kubelet's atomic swap of ..data
    ln -s "$1" "$t/secret/..data_tmp" && mv -T "$t/secret/..data_tmp" "$t/secret/..data"
}
fingerprint_file() { openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2; }
fingerprint_served() {
    openssl s_client -connect "127.0.0.1:$PORT" -servername localhost </dev/null 2>/dev/null |
        openssl x509 -noout -fingerprint -sha256 2>/dev/null | cut -d= -f2
}

issue ..2024_01 1001
publish ..2024_01
ln -s ..data/tls.crt "$t/secret/tls.crt"
ln -s ..data/tls.key "$t/secret/tls.key"

"$WEBHOOK" --listen 127.0.0.1:0 --cert "$t/secret/tls.crt" --key "$t/secret/tls.key" \
    --image gpucap:test --default-memory 25% --reload-interval 1 --threads 4 2>"$t/log" &
PID=$!
PORT=$(listen_port "$t/log" "$PID") || fail "server did not report its port"
URL="https://127.0.0.1:$PORT"
C=(curl -sS --max-time 20 --cacert "$t/ca.crt")

[ "$("${C[@]}" "$URL/healthz")" = ok ] || fail "/healthz"
code=$("${C[@]}" -o "$t/resp" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$HERE/fixtures/annotated-bare.json" "$URL/mutate")
[ "$code" = 200 ] || fail "/mutate status $code"
uid=$(sed -n 's/^    "uid": "\([^"]*\)",$/\1/p' "$HERE/fixtures/annotated-bare.json")
[ -n "$uid" ] && grep -q "\"uid\":\"$uid\"" "$t/resp" || fail "uid $uid not echoed: $(cat "$t/resp")"
grep -q '"patchType":"JSONPatch"' "$t/resp" || fail "no patch: $(cat "$t/resp")"
grep -q 'allowed: patched containers=train=8GiB max=25% preload=file' "$t/log" || fail "no decision line in the log"
grep -q 'policy: no max-memory: the default 25% is the maximum' "$t/log" || fail "the start-up log does not say that the default is the maximum"

expect_status() { # status, then curl arguments
    local want=$1; shift
    local got
    got=$("${C[@]}" -o "$t/body" -w '%{http_code}' "$@")
    [ "$got" = "$want" ] || fail "$* -> $got, expected $want ($(head -c 300 "$t/body"))"
}
expect_status 400 --data-binary '{"apiVersion": "admission.k8s.io/v1", "kind": "Admission' "$URL/mutate"
grep -q 'malformed JSON' "$t/body" || fail "400 without a message"
expect_status 400 --data-binary @"$HERE/fixtures/not-a-review.json" "$URL/mutate"
expect_status 405 "$URL/mutate"
expect_status 405 --data-binary x "$URL/healthz"
expect_status 404 "$URL/nope"
# One byte past the body limit (GPC_ADMISSION_MAX_BODY, 6 MiB).
head -c $(((6 << 20) + 1)) /dev/zero | tr '\0' ' ' >"$t/big"
# An announced oversize body is refused from its headers: with Expect: 100-continue the client waits
# for that answer instead of sending into a connection the server closes (a reset, not a 413).
expect_status 413 -H 'Expect: 100-continue' --data-binary @"$t/big" "$URL/mutate"
expect_status 413 -H 'Transfer-Encoding: chunked' --data-binary @"$t/big" "$URL/mutate"
"${C[@]}" "$URL/healthz" >/dev/null || fail "server gone after the oversize bodies"

# Many at once.
for i in $(seq 64); do
    "${C[@]}" -o /dev/null -w '%{http_code}\n' --data-binary @"$HERE/fixtures/init-containers.json" "$URL/mutate" &
done >"$t/codes"
wait_curls() { for j in $(jobs -p); do [ "$j" = "$PID" ] || wait "$j"; done; }
wait_curls
[ "$(grep -c '^200$' "$t/codes")" = 64 ] || fail "concurrent requests: $(sort "$t/codes" | uniq -c)"

# /livez, /readyz and /metrics (Prometheus text): admissions by result, latency, the certificate's expiry.
[ "$("${C[@]}" "$URL/livez")" = ok ] || fail "/livez"
[ "$("${C[@]}" "$URL/readyz")" = ok ] || fail "/readyz"
expect_status 405 --data-binary x "$URL/metrics"
"${C[@]}" "$URL/metrics" >"$t/metrics" || fail "/metrics"
if command -v promtool >/dev/null; then
    promtool check metrics <"$t/metrics" >"$t/lint" 2>&1 && [ ! -s "$t/lint" ] || fail "promtool: $(cat "$t/lint")"
fi
metric() { sed -n "s/^$1 //p" "$t/metrics"; }
[ "$(metric 'gpucap_webhook_admissions_total{result="patched"}')" = 65 ] ||
    fail "patched: $(grep admissions_total "$t/metrics")"
[ "$(metric 'gpucap_webhook_admissions_total{result="bad_request"}')" = 4 ] ||
    fail "bad_request (two 400, two 413): $(grep admissions_total "$t/metrics")"
[ "$(metric 'gpucap_webhook_admission_duration_seconds_count')" = 67 ] ||
    fail "latency count (65 patched, 2 malformed): $(grep duration_seconds_count "$t/metrics")"
[ "$(metric 'gpucap_webhook_admission_duration_seconds_bucket{le="+Inf"}')" = 67 ] || fail "+Inf bucket"
not_after=$(date -d "$(openssl x509 -in "$t/secret/..2024_01/tls.crt" -noout -enddate | cut -d= -f2)" +%s)
[ "$(metric gpucap_webhook_certificate_expiry_timestamp_seconds)" = "$not_after" ] ||
    fail "certificate expiry $(metric gpucap_webhook_certificate_expiry_timestamp_seconds), expected $not_after"

# Rotation: a new certificate and key, swapped in like the kubelet does.
old=$(fingerprint_served)
[ "$old" = "$(fingerprint_file "$t/secret/..2024_01/tls.crt")" ] || fail "served $old, not the first certificate"
issue ..2024_02 1002
publish ..2024_02
new=$(fingerprint_file "$t/secret/..2024_02/tls.crt")
for _ in $(seq 50); do
    [ "$(fingerprint_served)" = "$new" ] && break
    sleep 0.2
done
[ "$(fingerprint_served)" = "$new" ] || fail "still serving $old after rotation"
grep -q "reloaded certificate, sha256 fingerprint $new" "$t/log" || fail "rotation not logged"
[ "$("${C[@]}" "$URL/healthz")" = ok ] || fail "curl does not accept the rotated certificate"

# A key that does not match the certificate: refused, the current pair keeps serving.
issue ..2024_03 1003
cp "$t/secret/..2024_01/tls.key" "$t/secret/..2024_03/tls.key"
publish ..2024_03
for _ in $(seq 50); do
    grep -q 'keeping the previous certificate' "$t/log" && break
    sleep 0.2
done
grep -q 'keeping the previous certificate' "$t/log" || fail "mismatched pair not reported"
[ "$(fingerprint_served)" = "$new" ] || fail "a mismatched pair replaced the certificate"

kill -TERM "$PID"
wait "$PID"
rc=$?
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
echo "ok: TLS on port $PORT, rotation $old -> $new"
exit 0
