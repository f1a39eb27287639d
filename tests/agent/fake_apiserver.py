#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fake_apiserver.py PORTFILE LOG SCENARIO [CERT KEY]: a stand-in for the Kubernetes API server,
answering gpucap-agent as the real one does (HTTP/1.1 kept alive, a PodList or its metadata-only
form, pages with continue tokens, a watch as a chunked stream of JSON lines with ADDED/MODIFIED/
BOOKMARK/ERROR events, a 410 Gone, an Event created with 201), and as a hostile one may (bloated
pods, NULs, garbage, a slow answer, watches ended at once). Over TLS with CERT and KEY. Every
request is one JSON line of LOG: time, connection number, method, path, query, Accept, auth, body.

Scenarios (SCENARIO, see each class): basic, pages, bloated, files, ceiling, atonce, errors, hostile,
and for the benchmarks rate, restart, churn. Environment: FAKE_PODS, FAKE_RATE, FAKE_EVENTS, FAKE_POST_DELAY.
"""
import json
import os
import socket
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from json_server import JsonHandler, serve  # noqa: E402

NODE = "node-a"
TOKEN = "test-token-1"
UID = "0a0a0a0a-1111-4222-8333-000000000001"
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
META_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
LOCK = threading.Lock()


def uid_of(i):
    return "0a0a0a0a-1111-4222-8333-%012d" % i


def record(containers, mx="1GiB"):
    r = {"containers": containers}
    if mx is not None:
        r["max"] = mx
    return json.dumps(r, separators=(",", ":"))


def pod(budget, rv, node=NODE, uid=UID, name="train-0", rec=True, mx="1GiB", extra=None, raw_record=None,
        container="train"):
    ann = {"gpucap.io/injected": container}
    if raw_record is not None:
        ann["gpucap.io/budgets"] = raw_record
    elif rec:
        ann["gpucap.io/budgets"] = record({container: budget}, mx)
    if extra:
        ann.update(extra)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "uid": uid, "resourceVersion": str(rv),
                         "annotations": ann},
            "spec": {"nodeName": node, "containers": [{"name": container, "image": "x"}]},
            "status": {"phase": "Running"}}


def as_meta(p):
    """A Pod as the API server answers for as=PartialObjectMetadata: its metadata alone."""
    if p.get("kind") != "Pod":
        return p
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": p["metadata"]}


def podlist(rv, items, cont=None, meta=True):
    m = {"resourceVersion": str(rv)}
    if cont:
        m["continue"] = cont
    return {"apiVersion": "meta.k8s.io/v1" if meta else "v1",
            "kind": "PartialObjectMetadataList" if meta else "PodList", "metadata": m,
            "items": [as_meta(p) for p in items] if meta else items}


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def bookmark(rv):
    return {"type": "BOOKMARK", "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                           "metadata": {"resourceVersion": str(rv)}}}


GONE = {"type": "ERROR", "object": status(410, "Expired", "too old resource version: 102 (150)")}


class Handler(JsonHandler):
    protocol_version = "HTTP/1.1"  # kept alive: Content-Length, or chunked for a watch
    conns = 0

    def setup(self):
        super().setup()
        # Headers and body are two writes: without this, Nagle and the client's delayed ACK add 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with LOCK:
            Handler.conns += 1
            self.conn = Handler.conns

    def record(self, body=None):
        u = urllib.parse.urlsplit(self.path)
        with LOCK, open(sys.argv[2], "a") as f:
            f.write(json.dumps({"t": time.monotonic(), "conn": self.conn, "method": self.command, "path": u.path,
                                "query": urllib.parse.parse_qs(u.query), "accept": self.headers.get("Accept"),
                                "auth": self.headers.get("Authorization"), "body": body}) + "\n")
        return u

    def raw(self, code, data, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, code=200):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        if isinstance(data, (dict, list)):
            data = (json.dumps(data) + "\n").encode()
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def meta(self, obj, watch=False):
        """The object in the form the Accept header asked for."""
        want = META_WATCH if watch else META_LIST
        if self.headers.get("Accept") != want:
            return obj
        if watch:
            return dict(obj, object=as_meta(obj["object"])) if "object" in obj else obj
        return obj

    def do_GET(self):
        u = self.record()
        q = urllib.parse.parse_qs(u.query)
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.answer(401, status(401, "Unauthorized", "no"))
        sel = q.get("fieldSelector", [""])[0]
        if u.path != "/api/v1/pods" or not sel.startswith("spec.nodeName="):
            return self.answer(404, status(404, "NotFound", u.path))
        node = sel[len("spec.nodeName="):]
        if q.get("watch") in (["1"], ["true"]):
            return SCENARIO.watch(self, q, node)
        return SCENARIO.list(self, q, node)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
        u = self.record(body)
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.answer(401, status(401, "Unauthorized", "no"))
        if u.path.startswith("/api/v1/namespaces/") and u.path.endswith("/eviction") and "/pods/" in u.path:
            # policy/v1 Eviction of a pod (the arbiter's reclaim = evict): accepted as the API server
            # does when the pod's disruption budget allows it.
            return self.answer(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})
        if not u.path.startswith("/api/v1/namespaces/") or not u.path.endswith("/events"):
            return self.answer(404, status(404, "NotFound", u.path))
        time.sleep(float(os.environ.get("FAKE_POST_DELAY", "0")))
        body["metadata"]["name"] = body["metadata"].pop("generateName", "x.") + "abcde"
        return self.answer(201, body)


class Scripted:
    """Lists and watches answered in turn from LISTS and WATCHES (the last one repeats). A watch is
    a list of events, each a dict (sent after 0.2 s), a number (a pause), or b"..." (bytes as they are)."""
    LISTS, WATCHES = [], [[]]
    END = 0.2

    def __init__(self):
        self.lists = self.watches = 0

    def list(self, h, q, node):
        with LOCK:
            n = min(self.lists, len(self.LISTS) - 1)
            self.lists += 1
        ans = self.LISTS[n]
        if callable(ans):
            return ans(h, q)
        return h.answer(200, ans)

    def watch(self, h, q, node):
        with LOCK:
            n = min(self.watches, len(self.WATCHES) - 1)
            self.watches += 1
        w = self.WATCHES[n]
        if callable(w):
            return w(h, q)
        h.start_stream()
        for ev in w:
            if isinstance(ev, (int, float)):
                time.sleep(ev)
                continue
            time.sleep(0.2)
            h.chunk(h.meta(ev, True) if isinstance(ev, dict) else ev)
        time.sleep(self.END)
        h.end_stream()


class Basic(Scripted):
    """list 1 (rv 100): pod train-0 with budget train=64MiB (what its file says: no change), a pod of
    another node, a pod without a record; watch from 100: MODIFIED train-0 to 128MiB (rv 101), a
    BOOKMARK (rv 102), then ERROR 410; list 2 (rv 200): train-0 to 32MiB (changed while the agent
    was not watching); watch from 200: ended at once by the server; watch from 200 again: a
    BOOKMARK (rv 250) and a clean end after a second; then watches from 250 end cleanly."""
    LISTS = [
        podlist(100, [pod("64MiB", 90), pod("8GiB", 91, node="node-b", uid=uid_of(2), name="elsewhere"),
                      pod(None, 92, uid=uid_of(3), name="plain", rec=False)]),
        podlist(200, [pod("32MiB", 150)]),
    ]
    WATCHES = [[{"type": "MODIFIED", "object": pod("128MiB", 101)}, bookmark(102), GONE],
               lambda h, q: (h.start_stream(), h.end_stream()),
               [bookmark(250), 1.0],
               [1.2]]


class Pages(Scripted):
    """Metadata only, in pages: page 1 (continue "c1") and page 2 (continue "c2") of pods whose other
    annotations and labels hold NULs, 250 KiB values, numbers of 400 digits, bytes that are not
    UTF-8; page 3 answers 410 (the continue token expired): the agent lists once more without
    limit and gets every pod in one answer (rv 300), then watches from 300."""

    def pods(self):
        nul = {"tenant.io/nul": "a\u0000b", "tenant.io/big": "x" * 250000, "tenant.io/\u0000key": "v"}
        out = []
        for i in range(1, 7):
            p = pod("%dMiB" % (100 + i), 10 + i, uid=uid_of(i), name="p%d" % i, extra=nul)
            p["metadata"]["labels"] = {"l": "\u0000"}
            out.append(p)
        return out

    def list(self, h, q, node):
        with LOCK:
            self.lists += 1
        pods = self.pods()
        cont = q.get("continue", [None])[0]
        limit = int(q.get("limit", ["0"])[0] or 0)
        if cont == "c2":
            return h.answer(410, status(410, "Expired", "The provided continue parameter is too old"))
        if not limit:
            body = json.dumps(podlist(300, pods)).encode()
        else:
            start = {None: 0, "c1": 2}[cont]
            nxt = {None: "c1", "c1": "c2"}[cont]
            page = podlist(300, pods[start:start + 2], nxt)
            body = json.dumps(page).encode()
        # A number no integer type holds and bytes that are not UTF-8, in values nobody uses.
        body = body.replace(b'"status": {"phase": "Running"}', b'"status": {"n": 1' + b"7" * 400 + b', "b": "\xff\xfe"}')
        body = body.replace(b'"kind": "PartialObjectMetadata",', b'"kind": "PartialObjectMetadata", "n": -1' + b"9" * 400 + b', "b": "\xc3\x28",')
        h.raw(200, body)

    def watch(self, h, q, node):
        h.start_stream()
        time.sleep(0.3)
        h.end_stream()


class Bloated(Scripted):
    """FAKE_PODS pods (default 60) of about 1.5 MB each (managedFields and a 250 KiB annotation), in one
    answer whatever the limit (as the watch cache may do), streamed; then the last pod changes in the
    watch. Without metadata-only Accept, full Pods (the spec bloated too)."""

    def __init__(self):
        super().__init__()
        n = int(os.environ.get("FAKE_PODS", "60"))
        mf = [{"manager": "kubectl-%d" % j, "operation": "Update", "apiVersion": "v1",
               "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:k%d-%d" % (j, k): {}
                                                                                        for k in range(80)}}}}
              for j in range(800)]
        template = pod("@BUDGET@", 7, uid="@UID@", name="@NAME@", extra={"tenant.io/big": "y" * 250000})
        template["metadata"]["managedFields"] = mf
        self.tpl = json.dumps(template).encode()
        self.n = n
        sys.stderr.write("fake_apiserver: %d pods of %d bytes\n" % (n, len(self.tpl)))

    def one(self, i, budget):
        return (self.tpl.replace(b"@UID@", uid_of(i).encode()).replace(b"@NAME@", b"p%d" % i)
                .replace(b"@BUDGET@", budget.encode()))

    def list(self, h, q, node):
        with LOCK:
            self.lists += 1
        h.start_stream()
        h.chunk(b'{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"500"},"items":[')
        for i in range(1, self.n + 1):
            h.chunk((b"," if i > 1 else b"") + self.one(i, "%dMiB" % (100 + i % 7)))
        h.chunk(b"]}")
        h.end_stream()

    def watch(self, h, q, node):
        with LOCK:
            self.watches += 1
            first = self.watches == 1
        h.start_stream()
        if first:
            time.sleep(0.2)
            h.chunk(b'{"type":"MODIFIED","object":' + self.one(self.n, "77MiB") + b"}\n")
        time.sleep(0.5)
        h.end_stream()


class Files(Scripted):
    """Pods p1..p7 (uids 1..7), each with a record train=32MiB: the test plants a FIFO, a hard link, a
    symbolic link, a file of another owner... at their paths; p7 is a normal pod listed last."""
    LISTS = [podlist(400, [pod("32MiB", 40 + i, uid=uid_of(i), name="p%d" % i) for i in range(1, 8)])]
    WATCHES = [[1.0]]


def ceiling_pods():
    c = lambda i, raw, name=None: pod(None, 50 + i, uid=uid_of(i), name=name or "p%d" % i, raw_record=raw)
    return [
        c(1, record({"train": "16GiB"}, "16GiB")),            # raise above the fixed maximum 1GiB
        c(2, record({"train": "16GiB"}, None)),               # pre-record pod (no maximum): raise above 64MiB
        c(3, record({"train": "90%"}, "95%")),                # another unit: the maximum stays 1GiB
        c(4, record({"train": "512MiB"}, "512MiB")),          # within: applied, maximum lowered
        c(5, '{"containers":{"train":"8GiB"},"max":"16GiB","extra":1}'),  # not the webhook's shape
        c(6, '{"containers":{"train":"2GiB","train":"8GiB"}}'),           # a key twice
        c(7, '{"max":"1GiB","containers":{"train":"2GiB"}}'),             # above its own maximum
        c(8, '{"containers":{"train":"8GiB\\u0000"}}'),                   # a NUL
        c(9, '{"containers":{"Train_1":"8MiB"}}'),                        # not a container name
        c(10, '{"containers":{"train":8388608}}'),                        # not a string
        c(11, '{"containers":{"train":"0"}}'),                            # not a positive size
        c(12, "[1,2]"),                                                   # not an object
    ]


class Ceiling(Scripted):
    """Records a tenant may have written (pods/status, a pod injected before records existed...):
    list (rv 600) of ceiling_pods(); watch: p4 lowered to 16MiB then raised back to 1GiB (within its
    ceiling), p1 asks 2GiB again."""
    LISTS = [podlist(600, ceiling_pods())]
    WATCHES = [[{"type": "MODIFIED", "object": pod(None, 601, uid=uid_of(4), name="p4",
                                                   raw_record=record({"train": "16MiB"}, "1GiB"))},
                {"type": "MODIFIED", "object": pod(None, 602, uid=uid_of(4), name="p4",
                                                   raw_record=record({"train": "1GiB"}, "1GiB"))},
                {"type": "MODIFIED", "object": pod(None, 603, uid=uid_of(1), name="p1",
                                                   raw_record=record({"train": "2GiB"}, "2GiB"))}, 1.0]]


class AtOnce(Scripted):
    """One list (rv 700), then every watch ends at once with nothing in it."""
    LISTS = [podlist(700, [pod("64MiB", 70, uid=uid_of(1))])]
    WATCHES = [lambda h, q: (h.start_stream(), h.end_stream())]


class Errors(Scripted):
    """One list (rv 800), then watches that fail: HTTP 500, garbage, a connection closed in the middle
    of an event, an ERROR event that is not a 410, HTTP 429; then a good one (MODIFIED to 48MiB)."""
    LISTS = [podlist(800, [pod("64MiB", 80, uid=uid_of(1))])]

    def _500(h, q):
        h.answer(500, status(500, "InternalError", "etcd is sad"))

    def _429(h, q):
        h.answer(429, status(429, "TooManyRequests", "slow down"))

    def _cut(h, q):
        h.start_stream()
        h.chunk(b'{"type":"MODIFIED","object":{"metadata":{"name":"tr')
        h.close_connection = True
        h.wfile.flush()
        h.connection.shutdown(2)

    KINDS = {"500": _500, "garbage": [b"this is not json\n"], "cut": _cut,
             "error": [{"type": "ERROR", "object": status(500, "InternalError", "watch chan error")}], "429": _429}

    def __init__(self):
        super().__init__()
        self.WATCHES = [self.KINDS[k] for k in os.environ.get("FAKE_ERRORS", "500,garbage,cut").split(",")] + [
            [{"type": "MODIFIED", "object": pod("48MiB", 801, uid=uid_of(1))}, 1.0], [1.0]]


class Hostile(Scripted):
    """Lists that cannot be used, in turn: garbage, an object that is not a list, a token of 5 MiB,
    nesting 5,000 deep, a body cut short, a slow answer (a byte every 0.3 s); then a good list
    (rv 900, train-0 to 40MiB) and quiet watches."""

    def _garbage(h, q):
        h.raw(200, b"<html>proxy error</html>", "text/html")

    def _notlist(h, q):
        h.answer(200, {"kind": "PodList", "items": {"a": 1}})

    def _token(h, q):
        h.raw(200, b'{"kind":"PodList","metadata":{"resourceVersion":"1"},"x":"' + b"z" * (5 << 20) + b'","items":[]}')

    def _deep(h, q):
        h.raw(200, b'{"items":[' + b"[" * 5000 + b"]" * 5000 + b"]}")

    def _short(h, q):
        body = json.dumps(podlist(901, [pod("41MiB", 1)])).encode()
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body[: len(body) // 2])
        h.wfile.flush()
        h.close_connection = True
        h.connection.shutdown(2)

    def _slow(h, q):
        body = json.dumps(podlist(902, [pod("42MiB", 1)])).encode()
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        try:
            for b in body:
                h.wfile.write(bytes([b]))
                h.wfile.flush()
                time.sleep(0.3)
        except OSError:
            pass
        h.close_connection = True

    KINDS = {"garbage": _garbage, "notlist": _notlist, "token": _token, "deep": _deep, "short": _short,
             "slow": _slow}
    WATCHES = [[1.0]]

    def __init__(self):
        super().__init__()
        self.LISTS = [self.KINDS[k] for k in os.environ.get("FAKE_LISTS", "garbage,token,deep").split(",")] + [
            podlist(900, [pod("40MiB", 1, uid=uid_of(1))])]


class Rate(Scripted):
    """Benchmarks: FAKE_PODS pods (uids 1..N, container train); the first watch sends FAKE_EVENTS
    MODIFIED events, each a new budget of pod (i % N) + 1, FAKE_RATE per second (0: as fast as it
    can), and logs each event's send time to LOG.sent; later watches are quiet."""

    def __init__(self):
        super().__init__()
        self.n = int(os.environ.get("FAKE_PODS", "50"))

    def list(self, h, q, node):
        with LOCK:
            self.lists += 1
        h.answer(200, podlist(1000, [pod("64MiB", 1, uid=uid_of(i), name="p%d" % i, mx="64GiB")
                                     for i in range(1, self.n + 1)]))

    def watch(self, h, q, node):
        with LOCK:
            self.watches += 1
            first = self.watches == 1
        h.start_stream()
        if first:
            total, rate = int(os.environ.get("FAKE_EVENTS", "1000")), float(os.environ.get("FAKE_RATE", "0"))
            sent = []
            t0 = time.monotonic()
            for k in range(total):
                if rate:
                    delay = t0 + k / rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                i = k % self.n + 1
                budget = "%dMiB" % (65 + k)
                h.chunk({"type": "MODIFIED", "object": as_meta(pod(budget, 2000 + k, uid=uid_of(i), name="p%d" % i,
                                                                   mx="64GiB"))})
                sent.append((time.monotonic(), i, budget))
            with open(sys.argv[2] + ".sent.tmp", "w") as f:
                for t, i, b in sent:
                    f.write("%f %d %s\n" % (t, i, b))
            os.rename(sys.argv[2] + ".sent.tmp", sys.argv[2] + ".sent")
        time.sleep(3600)


class Restart(Scripted):
    """Benchmarks: agents of nodes node-0..; lists answer rv 1000 (one pod each); watches stay open,
    with a bookmark every 2 s. Once the file LOG.restart appears, every watch is ended (the server
    restarted), and every later watch from a resourceVersion below 2000 gets 410; lists then
    answer rv 2000."""

    def list(self, h, q, node):
        rv = 2000 if os.path.exists(sys.argv[2] + ".restart") else 1000
        h.answer(200, podlist(rv, [pod("64MiB", 1, node=node)]))

    def watch(self, h, q, node):
        rv = int(q.get("resourceVersion", ["0"])[0] or 0)
        restarted = os.path.exists(sys.argv[2] + ".restart")
        h.start_stream()
        if restarted and rv < 2000:
            h.chunk(GONE)
            return h.end_stream()
        for tick in range(6000):
            if not restarted and os.path.exists(sys.argv[2] + ".restart"):
                h.close_connection = True
                h.connection.shutdown(2)
                return
            time.sleep(0.1)
            if tick % 20 == 19:
                h.chunk(bookmark(rv))
        h.end_stream()


class Churn(Scripted):
    """Benchmarks: one list (rv 1000), then watches the server ends after 0.5-2 s, each with a bookmark
    (rv + 1), as an API server under pressure or a load balancer that cuts long requests does."""

    def list(self, h, q, node):
        with LOCK:
            self.lists += 1
        h.answer(200, podlist(1000, [pod("64MiB", 1, node=node)]))

    def watch(self, h, q, node):
        import random
        rv = int(q.get("resourceVersion", ["0"])[0] or 0)
        h.start_stream()
        time.sleep(random.uniform(0.25, 1.0))
        h.chunk(bookmark(rv + 1))
        time.sleep(random.uniform(0.25, 1.0))
        h.end_stream()


class Qos(Scripted):
    """Burstable memory (the arbiter, issue 35): pods train-0 (container train) and serve-0 (uid_of(5),
    container serve) without budget records, listed once; watches that last 2 s each."""
    LISTS = [podlist(100, [pod(None, 90, rec=False), pod(None, 91, uid=uid_of(5), name="serve-0", rec=False,
                                                         container="serve")])]
    WATCHES = [[bookmark(101), 2.0]]


SCENARIOS = {"qos": Qos, "basic": Basic, "pages": Pages, "bloated": Bloated, "files": Files, "ceiling": Ceiling,
             "atonce": AtOnce, "errors": Errors, "hostile": Hostile, "rate": Rate, "restart": Restart,
             "churn": Churn}
SCENARIO = SCENARIOS[sys.argv[3] if len(sys.argv) > 3 else "basic"]()

if __name__ == "__main__":
    serve(Handler, sys.argv[1], *(sys.argv[4:6] if len(sys.argv) > 5 else []))
