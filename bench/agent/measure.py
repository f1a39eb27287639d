#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""measure.py ROOT PODS SENT TIMEOUT: times gpucap-agent's changes from outside. Watches (inotify) the
settings files of pods 1..PODS under the kubelet-like ROOT, and for each budget the fake API server
sent (SENT: "monotonic-time pod budget" lines, written by fake_apiserver.py's rate scenario when it has
sent them all) takes the time the file first said it. Waits until every pod's file says its last budget
or TIMEOUT seconds pass. Prints one line: changes (sent, seen), changes per second (from the first
event sent to the last file rewritten) and the latency of each change seen (p50, p99, max, ms).
"""
import ctypes
import os
import re
import struct
import sys
import time

IN_MODIFY = 0x2
root, pods, sent_file, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
libc = ctypes.CDLL("libc.so.6", use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
paths = {}
for i in range(1, pods + 1):
    p = os.path.join(root, "0a0a0a0a-1111-4222-8333-%012d" % i, "volumes", "kubernetes.io~empty-dir", "gpucap-lib",
                     "train", "gpucap.ini")
    wd = libc.inotify_add_watch(fd, p.encode(), IN_MODIFY)
    if wd < 0:
        sys.exit("measure.py: cannot watch %s" % p)
    paths[wd] = (i, p)
seen = {}  # (pod, budget) -> first time seen
last = {}  # pod -> last budget seen
LIMIT = re.compile(rb"^memory_limit = (\S+)$", re.M)
end = time.monotonic() + timeout
sent = None
while time.monotonic() < end:
    try:
        buf = os.read(fd, 1 << 16)
    except BlockingIOError:
        if sent is None and os.path.exists(sent_file):
            sent = [l.split() for l in open(sent_file)]
            final = {}
            for t, i, b in sent:
                final[int(i)] = b
        if sent is not None and all(last.get(i) == b for i, b in final.items()):
            break
        time.sleep(0.0005)
        continue
    now = time.monotonic()
    off = 0
    while off < len(buf):
        wd, mask, cookie, ln = struct.unpack_from("iIII", buf, off)
        off += 16 + ln
        i, p = paths[wd]
        try:
            with open(p, "rb") as f:
                m = LIMIT.search(f.read())
        except OSError:
            continue
        if m:
            b = m.group(1).decode()
            seen.setdefault((i, b), now)
            last[i] = b
if sent is None:
    sys.exit("measure.py: the server never said what it sent")
lat = sorted((seen[(int(i), b)] - float(t)) * 1000 for t, i, b in sent if (int(i), b) in seen)
t_first = float(sent[0][0])
t_last = max(seen.values()) if seen else t_first
done = all(last.get(i) == b for i, b in final.items())
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
print("changes=%d seen=%d all_applied=%s changes_per_s=%.0f latency_ms_p50=%.2f p99=%.2f max=%.2f" %
      (len(sent), len(lat), "yes" if done else "no", len(sent) / max(t_last - t_first, 1e-9), pct(0.5), pct(0.99),
       lat[-1] if lat else float("nan")))
sys.exit(0 if done else 1)
