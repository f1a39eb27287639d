#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""hostile_bodies.py: request bodies built to exhaust the webhook's memory; its peak stays under the manifest.

usage: hostile_bodies.py PATH/TO/gpucap-webhook EXAMPLES_DIR [--sanitized]

From the security review (issue 16), over real TLS on loopback, against one server with the
Deployment's 4 threads:
  1. four AdmissionReviews of 3 MiB holding a million `{}` each, sent at once, announced by
     Content-Length and again chunked;
  2. four reviews just under the body limit made of `{}` (the worst shape that fits), at once;
  3. 40 connections announcing a 3 MiB body, and 40 more announcing one just under the limit, each
     sending all but its last byte and holding the connection.
The webhook's peak resident memory (VmHWM in /proc) must stay below the memory limit of the
Deployment in webhook.yaml, /healthz must still answer, and the server must exit cleanly. The figures
are printed (README.md of examples/kubernetes, "Limits", records them).
With --sanitized (a sanitizer build, whose memory use says nothing) the memory is printed, not
checked. Exit 0 pass, 1 fail, 77 without openssl or python3-yaml.
"""
import os
import shutil
import sys
import ssl
import threading
import time

try:
    import harness
except ImportError as e:  # python3-yaml missing
    print(f"{e}; skipping")
    sys.exit(77)

MIB = 1 << 20
LIMIT_BODY = 512 << 10
BUFFERED_MAX = 8 << 20  # bytes of requests held across all connections (server.c)


def review_of_empties(size):
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":['
    tail = b'{}]}}'
    n = (size - len(head) - len(tail)) // 3
    return head + b"{}," * n + tail


def review_of_keys(size):
    """One object with as many distinct keys as fit: the hash table's worst case."""
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{'
    keys, n = [], 0
    while sum(map(len, keys)) + len(head) + 64 < size and n < 60000:
        keys.append(b'"k%d":%d,' % (n, n))
        n += 1
    return head + b"".join(keys) + b'"end":0}}}'


def review_of_mixed(size):
    """As many `{}` as the shape limits allow, then numbers up to the element limit."""
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":['
    body = head + b"{}," * 16300 + b"1," * 49000
    return body[:size - 8] + b'0]}}' if len(body) > size - 8 else body + b'0]}}'


def post(hook, body, chunked=False, results=None):
    try:
        s = hook.tls_socket(timeout=60)
        hdr = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
        s.sendall(f"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{hdr}\r\n"
                  "Connection: close\r\n\r\n".encode())
        if chunked:
            for i in range(0, len(body), 65536):
                part = body[i:i + 65536]
                s.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            s.sendall(b"0\r\n\r\n")
        else:
            s.sendall(body)
        data = s.recv(4096)
        s.close()
        status = data.split(b" ")[1].decode() if data.startswith(b"HTTP/") else "closed"
    except OSError as e:
        status = f"error {type(e).__name__}"
    if results is not None:
        results.append(status)
    return status


def in_parallel(hook, body, n, chunked=False):
    results = []
    threads = [threading.Thread(target=post, args=(hook, body, chunked, results)) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(results)


def hold(hook, size, n):
    """n connections announcing size bytes and sending all but the last; returns them open, and how
    many of them the server turned away (an answer before the body was complete, or a hang-up)."""
    held, refused = [], 0
    body = review_of_empties(size)[:-1]
    for _ in range(n):
        try:
            s = hook.tls_socket(timeout=10)
            s.sendall(f"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode())
            s.settimeout(0.5)
            try:
                for i in range(0, len(body), 65536):
                    s.sendall(body[i:i + 65536])
                s.settimeout(0.05)
                answer = s.recv(100)
                refused += 1  # an answer, or the end of the stream, before the last byte
            except (TimeoutError, ssl.SSLWantReadError):
                pass  # still waiting for the last byte: held
            except OSError:
                refused += 1
            held.append(s)
        except OSError:
            refused += 1
    return held, refused
def main():
    if not shutil.which("openssl"):
        print("openssl missing; skipping")
        return 77
    hook, limit, sanitized = harness.start(sys.argv)
    failures = []
    try:
        idle = hook.status("VmRSS")
        print(f"idle: VmRSS {idle / MIB:.1f} MiB; manifest limit {limit / MIB:.0f} MiB")

        # Connections that finished their handshake and headers and wait for a body that never comes,
        # from three more addresses: most of the connection limit, each with its TLS state.
        waiting = []
        for source in ("127.0.0.4", "127.0.0.5", "127.0.0.6"):
            for _ in range(60):
                try:
                    s = hook.tls_socket(timeout=10, source=source)
                    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
                    waiting.append(s)
                except OSError:
                    pass
        print(f"{len(waiting)} connections waiting for a body: VmRSS {hook.status('VmRSS') / MIB:.1f} MiB")

        big = review_of_empties(3 * MIB)
        print("3 MiB of {} x4, Content-Length:", in_parallel(hook, big, 4))
        print("3 MiB of {} x4, chunked:", in_parallel(hook, big, 4, chunked=True))
        print(f"after the 3 MiB reviews: VmHWM {hook.status('VmHWM') / MIB:.1f} MiB")

        fits = review_of_empties(LIMIT_BODY - 64)
        codes = in_parallel(hook, fits, 4)
        print(f"{len(fits)} bytes of {{}} x4:", codes)
        if "200" in codes:
            failures.append(f"a review of {len(fits)} bytes of {{}} was parsed and answered 200")
        codes = in_parallel(hook, fits, 4, chunked=True)
        print(f"{len(fits)} bytes of {{}} x4, chunked:", codes)
        for name, body in (("distinct keys", review_of_keys(LIMIT_BODY)), ("{} and numbers", review_of_mixed(LIMIT_BODY))):
            print(f"{len(body)} bytes of {name} x4:", in_parallel(hook, body, 4))
        print(f"after the bodies under the limit: VmHWM {hook.status('VmHWM') / MIB:.1f} MiB")

        held_big, refused_big = hold(hook, 3 * MIB, 40)
        near = LIMIT_BODY - 64
        held, refused = hold(hook, near, 40)
        held += held_big
        print(f"40 uploads of 3 MiB: {refused_big} refused; 40 of {near} bytes: {refused} refused")
        if refused_big != 40:
            failures.append(f"{40 - refused_big} uploads announcing 3 MiB were read")
        if 40 - refused > BUFFERED_MAX // near:
            failures.append(f"{40 - refused} uploads of {near} bytes held at once, more than "
                            f"{BUFFERED_MAX // near} fit in {BUFFERED_MAX >> 20} MiB")
        time.sleep(1)
        print(f"holding {len(held)} connections with nearly complete uploads: VmRSS "
              f"{hook.status('VmRSS') / MIB:.1f} MiB, {hook.open_fds()} descriptors")
        try:
            print(f"/healthz while they are held: {hook.healthz(source='127.0.0.3') * 1000:.0f} ms")
        except Exception as e:
            failures.append(f"/healthz while uploads are held: {e}")
        for s in held + waiting:
            s.close()

        peak = max(hook.status("VmHWM"), hook.status("VmRSS"))
        print(f"peak: VmHWM {peak / MIB:.1f} MiB of a {limit / MIB:.0f} MiB limit")
        if peak >= limit and not sanitized:
            failures.append(f"peak resident memory {peak / MIB:.1f} MiB is not below the manifest's "
                            f"limit of {limit / MIB:.0f} MiB")
        try:
            hook.healthz()
        except Exception as e:
            failures.append(f"/healthz after the attack: {e}")
    finally:
        status = hook.finish(failures, tail=30)
    return status


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
