#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""qos_client.py: a process of a member, as the library would be, speaking to the arbiter's socket.

  qos_client.py [--map LEDGER] [--pid-text N] [--wait S] [--repeat N] SOCK VERB UUID BYTES
      maps LEDGER (as every process of a member does: the arbiter knows its processes by it), sends
      "VERB UUID BYTES PID" from an autobound address and prints each answer as "ANSWER ms=T", until
      a final one (granted or refused) or --wait seconds (then "timeout"). --pid-text forges the pid
      written in the text (the arbiter must go by the kernel's). --repeat N: N requests, one after the
      other; then prints "p50_ms=.. p99_ms=.. max_ms=.. granted=.. refused=.." instead.
"""
import argparse
import mmap
import os
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--map")
    ap.add_argument("--pid-text", type=int)
    ap.add_argument("--wait", type=float, default=5.0)
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("sock")
    ap.add_argument("verb")
    ap.add_argument("uuid")
    ap.add_argument("bytes")
    a = ap.parse_args()
    keep = None
    if a.map:
        f = open(a.map, "rb")
        keep = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("")  # autobind: an abstract address the arbiter can answer
    pid = a.pid_text if a.pid_text is not None else os.getpid()
    line = ("%s %s %s %d" % (a.verb, a.uuid, a.bytes, pid)).encode()

    def ask():
        t0 = time.monotonic()
        s.sendto(line, a.sock)
        out = []
        while True:
            left = a.wait - (time.monotonic() - t0)
            if left <= 0:
                out.append(("timeout", (time.monotonic() - t0) * 1000))
                return out
            s.settimeout(left)
            try:
                msg = s.recv(512).decode(errors="replace").strip()
            except socket.timeout:
                continue
            out.append((msg, (time.monotonic() - t0) * 1000))
            if not msg.startswith("pending"):
                return out

    if a.repeat:
        times, granted, refused = [], 0, 0
        for _ in range(a.repeat):
            ans = ask()
            times.append(ans[-1][1])
            granted += ans[-1][0].startswith("granted")
            refused += ans[-1][0].startswith("refused")
        times.sort()
        print("p50_ms=%.3f p99_ms=%.3f max_ms=%.3f granted=%d refused=%d" % (
            times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))], times[-1], granted, refused))
    else:
        for msg, ms in ask():
            print("%s ms=%.1f" % (msg, ms))
            sys.stdout.flush()
    del keep


if __name__ == "__main__":
    main()
