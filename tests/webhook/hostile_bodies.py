#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""hostile_bodies.py: request bodies built to exhaust the webhook's memory; its peak stays under the manifest,
and the largest reviews the API server can send are answered.

usage: hostile_bodies.py PATH/TO/gpucap-webhook EXAMPLES_DIR [--sanitized]

Over real TLS on loopback, against one server with the Deployment's 4 threads:
  1. the largest legitimate reviews (issue 30): an UPDATE carries two pods, each with the API
     server's maximum of annotations (256 KiB): one annotation of 261,000 bytes (a tenant's, on a pod
     the platform then lowers), 256 KiB of '<' that the API server's JSON writes as \u003c (1.5 MiB
     a pod), some 32,000 small annotations with the managedFields that list them; four of each at
     once must all be answered 200;
  2. four reviews past the body limit made of `{}`, announced by Content-Length and again chunked
     (413 or closed), four just under it of `{}`, of distinct keys and of `{}` and numbers (400: too
     costly to parse), and eight that pass the shape check with the largest parse it allows
     (answered, one at a time within the bound on the parses in flight: issue 16, issue 30);
  3. 40 connections announcing a body of the limit and 40 more of 3 MiB, each sending all but its
     last byte and holding the connection (only as many as the buffered bytes allow are read).
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

import json

MIB = 1 << 20
LIMIT_BODY = 6 << 20    # GPC_ADMISSION_MAX_BODY (admission.h)
BUFFERED_MAX = 24 << 20  # bytes of requests held across all connections (server.c)
PARSE_BUDGET = 40 << 20  # estimated memory of the parses in flight (server.c, shape.c)
HERE = os.path.dirname(os.path.abspath(__file__))
ANNOTATIONS_MAX = 256 << 10  # the API server's bound on a pod's annotations, keys and values together


def review_of_empties(size):
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":['
    tail = b'{}]}}'
    n = (size - len(head) - len(tail)) // 3
    return head + b"{}," * n + tail


def review_of_keys(size, value=b"{}"):
    """One object with as many distinct keys as fit, each holding `value`: the hash table's worst case."""
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{'
    parts, used, n = [], len(head) + 16, 0
    while True:
        part = b'"k%x":%s,' % (n, value)
        if used + len(part) > size:
            break
        parts.append(part)
        used += len(part)
        n += 1
    return head + b"".join(parts) + b'"end":0}}}'


def review_of_mixed(size):
    """`{}` and numbers, alternating, up to the size."""
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":['
    n = (size - len(head) - 8) // 5
    return head + b"{},1," * n + b'0]}}'


def review_at_parse_bound():
    """Distinct keys of `{}`, as many as the parse bound allows (about 380 bytes of estimate each)."""
    n = (PARSE_BUDGET - (4 << 20)) // 380
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{'
    return head + b"".join(b'"k%x":{},' % i for i in range(n)) + b'"end":0}}}'


def pod_update(annotations, managed=None):
    """An UPDATE review of an injected GPU pod whose two sides carry `annotations` (and managedFields)."""
    with open(os.path.join(HERE, "fixtures", "annotated-bare.json")) as f:
        review = json.load(f)
    pod = review["request"]["object"]
    pod["metadata"]["annotations"] = dict(annotations, **{
        "gpucap.io/memory": "8GiB", "gpucap.io/injected": "train",
        "gpucap.io/budgets": '{"max":"25%","containers":{"train":"25%"}}'})
    pod["spec"]["initContainers"] = [{"name": "gpucap-init", "image": "gpucap:test"}]
    if managed is not None:
        pod["metadata"]["managedFields"] = managed
    old = json.loads(json.dumps(pod))
    pod["metadata"]["annotations"]["gpucap.io/memory"] = "4GiB"  # the platform lowers the budget
    review["request"].update(operation="UPDATE", object=pod, oldObject=old)
    # The API server's encoder writes '<', '>' and '&' as \u003c, \u003e, \u0026.
    return json.dumps(review).replace("<", "\\u003c").encode()


def largest_reviews():
    """(name, body) of the largest UPDATE reviews the API server can send."""
    big = {"example.com/blob": "x" * 261000}
    escaped = {"example.com/lt": "<" * (ANNOTATIONS_MAX - len("example.com/lt") - 200)}
    small, size = {}, 200
    while size < ANNOTATIONS_MAX - 16:
        k = "a%x" % len(small)
        small[k] = "v"
        size += len(k) + 1
    managed = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{k}": {} for k in small}}}}]
    return [("one annotation of 261,000 bytes", pod_update(big)),
            ("256 KiB of '<' as \\u003c", pod_update(escaped)),
            (f"{len(small)} small annotations and their managedFields", pod_update(small, managed))]


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

        # The largest legitimate reviews: answered, four at once.
        for name, body in largest_reviews():
            codes = in_parallel(hook, body, 4)
            print(f"UPDATE with {name} ({len(body) / MIB:.2f} MiB) x4: {codes}; VmHWM {hook.status('VmHWM') / MIB:.1f} MiB")
            if codes != ["200"] * 4:
                failures.append(f"the UPDATE with {name} ({len(body)} bytes) was not answered 200 four times: {codes}")

        # Connections that finished their handshake and headers and wait for a body that never comes,
        # from three more addresses: many of the connection slots, each with its TLS state.
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

        over = review_of_empties(LIMIT_BODY + MIB)
        print(f"{len(over) >> 20} MiB of {{}} x4, Content-Length:", in_parallel(hook, over, 4))
        print(f"{len(over) >> 20} MiB of {{}} x4, chunked:", in_parallel(hook, over, 4, chunked=True))
        print(f"after the reviews past the limit: VmHWM {hook.status('VmHWM') / MIB:.1f} MiB")

        for name, body in (("{}", review_of_empties(LIMIT_BODY - 64)), ("distinct keys", review_of_keys(LIMIT_BODY - 64)),
                           ("{} and numbers", review_of_mixed(LIMIT_BODY - 64))):
            for chunked in (False, True):
                codes = in_parallel(hook, body, 4, chunked=chunked)
                print(f"{len(body)} bytes of {name} x4{', chunked' if chunked else ''}:", codes)
                if "200" in codes:
                    failures.append(f"a review of {len(body)} bytes of {name} was parsed and answered 200")
        at_bound = review_at_parse_bound()
        codes = in_parallel(hook, at_bound, 8)
        print(f"{len(at_bound)} bytes of distinct keys, at the parse bound, x8: {codes}")
        if codes.count("200") + codes.count("400") != 8:
            failures.append(f"reviews at the parse bound not all answered: {codes}")
        print(f"after the bodies under the limit: VmHWM {hook.status('VmHWM') / MIB:.1f} MiB")

        held_big, refused_big = hold(hook, LIMIT_BODY, 40)
        near = 3 * MIB
        held, refused = hold(hook, near, 40)
        held += held_big
        print(f"40 uploads of {LIMIT_BODY >> 20} MiB: {refused_big} refused; 40 of {near >> 20} MiB: {refused} refused")
        if 40 - refused_big > BUFFERED_MAX // LIMIT_BODY:
            failures.append(f"{40 - refused_big} uploads of {LIMIT_BODY} bytes held at once, more than "
                            f"{BUFFERED_MAX // LIMIT_BODY} fit in {BUFFERED_MAX >> 20} MiB")
        if (40 - refused_big) * LIMIT_BODY + (40 - refused) * near > BUFFERED_MAX:
            failures.append(f"more uploads held than {BUFFERED_MAX >> 20} MiB of buffers hold")
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
