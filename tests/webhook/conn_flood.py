#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""conn_flood.py: 1100 idle connections from one address; /healthz from another still answers.

usage: conn_flood.py PATH/TO/gpucap-webhook EXAMPLES_DIR [--sanitized]

From the security review (issue 16): one client opens 1100 TCP connections to the webhook and sends
one byte on each (the start of a TLS record that never completes), from 127.0.0.2. While they are
open, /healthz over TLS from 127.0.0.1 must answer within 5 s (the API server's timeout; it takes
tens of milliseconds), the server must hold a bounded number of descriptors (its per-address limit,
512 by default, refuses the rest: an API server has that many reviews in flight, issue 30), its peak memory must stay below the Deployment's limit, and the error lines the
flood causes must be rate-limited. Then the server must drop the stalled connections on its own
(the deadline for request headers), and three connections that sent their headers but only half of
their body (the deadline for the body), and exit cleanly. Loopback only. With --sanitized (a sanitizer
build) the memory is printed, not checked. Exit 0 pass, 1 fail, 77 without openssl or python3-yaml.
"""
import resource
import shutil
import socket
import sys
import time

try:
    import harness
except ImportError as e:
    print(f"{e}; skipping")
    sys.exit(77)

FLOOD = 1100
PER_ADDRESS = 512  # --max-connections-per-ip's default (tools/webhook/main.c)
MIB = 1 << 20


def main():
    if not shutil.which("openssl"):
        print("openssl missing; skipping")
        return 77
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = FLOOD + 100
    try:
        if hard != resource.RLIM_INFINITY and hard < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))  # root may raise it
        else:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    except (ValueError, OSError):
        print(f"descriptor limit {hard} is below {want} and cannot be raised; skipping")
        return 77
    hook, limit, sanitized = harness.start(sys.argv)
    failures = []
    flood = []
    trickle = []
    try:
        base_fds = hook.open_fds()
        for _ in range(3):
            t = hook.tls_socket(source="127.0.0.3")
            t.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + b"{" * 500)
            trickle.append(t)
        for _ in range(FLOOD):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.bind(("127.0.0.2", 0))
                s.connect_ex(("127.0.0.1", hook.port))
            except OSError:
                pass
            flood.append(s)
        time.sleep(0.5)
        for s in flood:
            try:
                s.send(b"\x16")
            except OSError:
                pass  # refused by the server already
        time.sleep(0.5)
        held = hook.open_fds() - base_fds
        print(f"flood of {FLOOD} connections: the server holds {held} of them")
        if held > PER_ADDRESS + 16:
            failures.append(f"the server holds {held} connections from one address, more than its default of "
                            f"{PER_ADDRESS}")
        try:
            took = hook.healthz(timeout=5)
            print(f"/healthz during the flood: {took * 1000:.0f} ms")
        except Exception as e:
            failures.append(f"/healthz during the flood: {e}")
        rss = hook.status("VmHWM")
        print(f"peak memory during the flood: VmHWM {rss / MIB:.1f} MiB of a {limit / MIB:.0f} MiB limit")
        if rss >= limit and not sanitized:
            failures.append(f"peak memory {rss / MIB:.1f} MiB is not below the manifest's {limit / MIB:.0f} MiB")

        # The stalled connections are dropped by the deadlines, without the client closing them.
        for _ in range(150):
            if hook.open_fds() - base_fds <= 0:
                break
            time.sleep(0.1)
        left = hook.open_fds() - base_fds
        print(f"connections left 15 s later: {left}")
        if left > 0:
            failures.append(f"{left} stalled connections still open 15 s later")
        for t in trickle:
            t.settimeout(1)
            try:
                data = t.recv(100)
            except OSError:
                data = b""
            if data:
                failures.append(f"a half-sent body got an answer instead of a closed connection: {data[:60]!r}")
    finally:
        for s in flood + trickle:
            s.close()
        time.sleep(0.5)
        lines = [l for l in hook.read_log().splitlines() if "listening on" not in l and "serving" not in l]
        print(f"log lines caused by the flood: {len(lines)}")
        if len(lines) > 40:
            failures.append(f"{len(lines)} log lines for one flood: not rate-limited")
        status = hook.finish(failures, tail=20)
    return status


if __name__ == "__main__":
    sys.exit(main())
