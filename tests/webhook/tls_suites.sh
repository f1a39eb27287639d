#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tls_suites.sh: the protocol versions and cipher suites gpucap-webhook accepts, one openssl s_client each.
#
# usage: tls_suites.sh PATH/TO/gpucap-webhook
# Only TLS 1.3, and TLS 1.2 with an ECDHE key exchange and an AEAD cipher, may be negotiated. The
# server gets an RSA certificate, so that the static-RSA suites the security review found (issue 16)
# would be possible if the server offered them, then an ECDSA one for the ECDSA suites.
# Exit 0 pass, 1 fail, 77 without openssl.
set -u
WEBHOOK=${1:?usage: tls_suites.sh PATH/TO/gpucap-webhook}
command -v openssl >/dev/null || { echo "openssl missing; skipping"; exit 77; }

. "$(dirname "$0")/../common.sh"
PID=

start() { # key type: rsa or ec
    [ -n "$PID" ] && { kill "$PID"; wait "$PID" 2>/dev/null; }
    local opt=(-newkey rsa:2048)
    [ "$1" = ec ] && opt=(-newkey ec -pkeyopt ec_paramgen_curve:P-256)
    openssl req -x509 "${opt[@]}" -nodes -days 1 -subj /CN=127.0.0.1 -keyout "$t/$1.key" -out "$t/$1.crt" \
        2>/dev/null || { echo "FAIL: cannot make a certificate"; exit 1; }
    : >"$t/log"
    "$WEBHOOK" --listen 127.0.0.1:0 --cert "$t/$1.crt" --key "$t/$1.key" --image gpucap:test 2>"$t/log" &
    PID=$!
    PORT=$(listen_port "$t/log" "$PID") || { echo "FAIL: the server did not start"; cat "$t/log"; exit 1; }
}

# What one handshake negotiated: "VERSION CIPHER", or "refused".
try() {
    local out
    out=$(openssl s_client -connect "127.0.0.1:$PORT" "$@" </dev/null 2>&1)
    # s_client's summary line: "New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256", or "(NONE)".
    local proto cipher
    proto=$(sed -n 's/^New, \([^,]*\), Cipher is .*/\1/p' <<<"$out" | head -1)
    cipher=$(sed -n 's/^New, [^,]*, Cipher is //p' <<<"$out" | head -1)
    if [ -n "$cipher" ] && [ "$cipher" != "(NONE)" ]; then
        echo "$proto $cipher"
    else
        echo refused
    fi
}
accept() { # suite, then s_client arguments
    local name=$1; shift
    local got; got=$(try "$@")
    [ "$got" = refused ] && bad "$name refused, expected accepted" || echo "accepted: $name ($got)"
}
refuse() {
    local name=$1; shift
    local got; got=$(try "$@")
    [ "$got" = refused ] && echo "refused:  $name" || bad "$name negotiated ($got), expected refused"
}

# Old protocols need openssl's security level 0 to be offered at all.
LEGACY=(-cipher 'ALL:@SECLEVEL=0')

start rsa
for s in TLS_AES_128_GCM_SHA256 TLS_AES_256_GCM_SHA384 TLS_CHACHA20_POLY1305_SHA256; do
    accept "TLS 1.3 $s" -tls1_3 -ciphersuites "$s"
done
for s in ECDHE-RSA-AES128-GCM-SHA256 ECDHE-RSA-AES256-GCM-SHA384 ECDHE-RSA-CHACHA20-POLY1305; do
    accept "TLS 1.2 $s" -tls1_2 -cipher "$s"
done
# Static RSA key exchange (no forward secrecy), finite-field DHE, CBC with SHA-1 or SHA-2 MACs, RC4, 3DES.
for s in AES128-SHA AES256-SHA AES128-GCM-SHA256 AES256-GCM-SHA384 AES128-SHA256 DHE-RSA-AES128-GCM-SHA256 \
         DHE-RSA-AES256-GCM-SHA384 DHE-RSA-CHACHA20-POLY1305 ECDHE-RSA-AES128-SHA ECDHE-RSA-AES256-SHA \
         ECDHE-RSA-AES128-SHA256 ECDHE-RSA-AES256-SHA384 DES-CBC3-SHA ECDHE-RSA-DES-CBC3-SHA; do
    refuse "TLS 1.2 $s" -tls1_2 -cipher "$s:@SECLEVEL=0"
done
refuse "TLS 1.1" -tls1_1 "${LEGACY[@]}"
refuse "TLS 1.0" -tls1 "${LEGACY[@]}"
# A client offering everything gets TLS 1.3; one limited to 1.2 gets an ECDHE AEAD suite.
got=$(try)
case "$got" in TLSv1.3\ *) echo "default client: $got" ;; *) bad "default client negotiated $got" ;; esac
got=$(try -tls1_2 -cipher 'ALL:@SECLEVEL=0')
case "$got" in "TLSv1.2 ECDHE-"*GCM*|"TLSv1.2 ECDHE-"*CHACHA20*) echo "TLS 1.2 client offering all: $got" ;;
    *) bad "a TLS 1.2 client offering every suite negotiated $got" ;; esac

start ec
for s in ECDHE-ECDSA-AES128-GCM-SHA256 ECDHE-ECDSA-AES256-GCM-SHA384 ECDHE-ECDSA-CHACHA20-POLY1305; do
    accept "TLS 1.2 $s" -tls1_2 -cipher "$s"
done
for s in ECDHE-ECDSA-AES128-SHA ECDHE-ECDSA-AES256-SHA ECDHE-ECDSA-AES128-SHA256 ECDHE-ECDSA-AES256-SHA384 \
         ECDHE-ECDSA-AES128-CCM; do
    refuse "TLS 1.2 $s" -tls1_2 -cipher "$s:@SECLEVEL=0"
done
accept "TLS 1.3 TLS_AES_128_GCM_SHA256 (ECDSA)" -tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256

kill -TERM "$PID"
wait "$PID"
rc=$?
[ "$rc" = 0 ] || bad "exit status $rc after SIGTERM"
[ $fail = 0 ] && echo ok
exit $fail
