#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""inflight.py: how many reviews in flight from one address gpucap-webhook refuses (a benchmark).

usage: bench/webhook/inflight.py PATH/TO/gpucap-webhook [IN_FLIGHT...] [-- WEBHOOK_FLAG...]

The API server opens one HTTP/1.1 connection per review in flight to a webhook, all from its own
address, up to its --max-mutating-requests-inflight (200 by default) and more with several
webhooks or bursts. For each IN_FLIGHT (default: 64 128 256 384), that many clients on 127.0.0.1
connect over TLS at once, wait until all are connected, then each posts one review
(tests/webhook/fixtures/init-containers.json) and reads the answer. Prints, per run: the reviews
answered 200, the refused ones (the connection closed or reset before an answer, or a status other
than 200), the answer latency (p50, p99), and the webhook's peak resident memory. Starts the webhook
with its defaults (and the WEBHOOK_FLAGs after --). Exit 1 when any review of a run was refused,
77 without openssl. Loopback only; bounded (each run ends within 60 s).
"""
import os
import socket
import ssl
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../tests/webhook"))
try:
    import harness
except ImportError as e:
    print(f"{e}; skipping")
    sys.exit(77)


def one(hook, body, barrier, results):
    """One client: connects, waits for all the others to have tried, posts, reads the answer."""
    s = None
    try:
        s = hook.tls_socket(timeout=30)
    except OSError as e:
        why = type(e).__name__.encode()
    try:
        barrier.wait(timeout=45)
    except threading.BrokenBarrierError:
        pass
    if s is None:
        results.append((False, 0.0, why))
        return
    t0 = time.monotonic()
    try:
        s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n%s" % (len(body), body))
        data = harness.read_to_end(s)
        s.close()
        results.append((data.startswith(b"HTTP/1.1 200"), time.monotonic() - t0, data[:40]))
    except OSError as e:
        results.append((False, time.monotonic() - t0, type(e).__name__.encode()))


def run(hook, body, n):
    barrier = threading.Barrier(n)
    results = []
    threads = [threading.Thread(target=one, args=(hook, body, barrier, results)) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ok = sorted(d for good, d, _ in results if good)
    refused = [why for good, _, why in results if not good]
    return ok, refused


def main():
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    if not argv:
        print(__doc__)
        return 2
    import shutil
    if not shutil.which("openssl"):
        print("openssl missing; skipping")
        return 77
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192) if hard != resource.RLIM_INFINITY else 8192, hard))
    counts = [int(a) for a in argv[1:]] or [64, 128, 256, 384]
    with open(os.path.join(HERE, "../../tests/webhook/fixtures/init-containers.json"), "rb") as f:
        body = f.read()
    hook = harness.Webhook(argv[0], extra=flags)
    status = 0
    try:
        print(f"gpucap-webhook {' '.join(flags) or '(defaults)'}; {os.cpu_count()} CPUs; body {len(body)} bytes")
        for n in counts:
            ok, refused = run(hook, body, n)
            p = lambda q: ok[min(len(ok) - 1, int(q * len(ok)))] * 1000 if ok else float("nan")
            print(f"in flight {n:4d} from one address: answered {len(ok):4d}, refused {len(refused):4d}; "
                  f"latency p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms; VmHWM {hook.status('VmHWM') / (1 << 20):.1f} MiB"
                  + (f"; refusals: {sorted(set(refused))[:3]}" if refused else ""))
            if refused and n <= 256:
                status = 1
            time.sleep(1)
    finally:
        hook.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
