#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""exporter_flood.py EXPORTER: idle connections against gpucap-exporter (issue 23).

One client at 127.0.0.2 opens 70 TCP connections and sends nothing (the exporter used to allow 64
connections in all, none per address, and wait 10 s on each: 6 scrapes of 6 failed). While they are
open, 6 scrapes from 127.0.0.1 must each answer 200 within 2 s (the per-address limit refuses the
flood's extra connections); the flood's connections must be closed by the exporter within the
header deadline (5 s, swept every 100 ms) and counted in gpucap_exporter_connections_closed_slow_total.
Prints the scrape times. Exit 0 pass, 1 fail.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

FLOOD = 70


def main():
    exporter = sys.argv[1]
    root = tempfile.mkdtemp()
    log = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen([exporter, "--listen", "0.0.0.0:0", "--root", root], stderr=log)
    failures = []
    try:
        port = None
        for _ in range(100):
            log.seek(0)
            m = re.search(r"listening on http://[0-9.]+:(\d+);", log.read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.05)
        if not port:
            print("FAIL exporter did not start")
            return 1
        flood, refused = [], 0
        for _ in range(FLOOD):
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            s.settimeout(2)
            try:
                s.connect(("127.0.0.1", port))
                flood.append(s)
            except OSError:
                refused += 1
                s.close()
        time.sleep(0.3)
        # Connections over the per-address limit are accepted by the kernel, then closed by the
        # exporter at once: count those that are still open.
        alive = 0
        for s in flood:
            s.setblocking(False)
            try:
                alive += s.recv(1) != b""
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
        print(f"flood: {len(flood)} connected, {alive} held open by the exporter")
        if alive > 4:
            failures.append(f"{alive} connections of one address held open (limit 4)")
        times = []
        for i in range(6):
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    ok = r.status == 200 and b"gpucap_exporter_ledgers" in r.read()
            except OSError as e:
                ok = False
                print(f"scrape {i}: {e}")
            times.append(time.monotonic() - t0)
            if not ok:
                failures.append(f"scrape {i} failed during the flood")
        print("scrape times during the flood (ms): " + ", ".join(f"{t * 1000:.1f}" for t in times))
        # The header deadline: the held connections are closed by the exporter.
        t0 = time.monotonic()
        open_ones = [s for s in flood]
        for s in open_ones:
            s.setblocking(True)
            s.settimeout(max(0.1, 8 - (time.monotonic() - t0)))
            try:
                s.recv(1)
            except socket.timeout:
                failures.append("a connection without headers was still open after 8 s")
                break
            except OSError:
                pass
        print(f"held connections closed by the exporter after {time.monotonic() - t0:.1f} s")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                body = r.read().decode()
        except OSError as e:
            body = ""
            failures.append(f"scrape after the flood: {e}")
        m = re.search(r"^gpucap_exporter_connections_closed_slow_total (\d+)$", body, re.M)
        if not m or int(m.group(1)) < 1:
            failures.append(f"closed_slow counter: {m.group(0) if m else 'missing'}")
        for s in flood:
            s.close()
    finally:
        p.terminate()
        p.wait(5)
        os.rmdir(root)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
