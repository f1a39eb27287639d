#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""fake_apiserver.py: a Kubernetes API server reduced to GET /api/v1/namespaces/NAME, over TLS on loopback.

usage: fake_apiserver.py PORT_FILE CERT KEY TOKEN
Serves the Namespace objects below with their gpucap.io/* annotations, only to a client that sends
"Authorization: Bearer TOKEN" (401 otherwise, 404 for an unknown name, 503 for "flaky"), and GET /hits/NAME: how
many times NAME was fetched (for the cache test). Writes the port it listens on to PORT_FILE.
"""
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAMESPACES = {
    "ml": {"gpucap.io/max-memory": "4GiB", "gpucap.io/default-memory": "2GiB"},
    "research": {"gpucap.io/trusted": "true"},
    "open": {},
    "typo": {"gpucap.io/max-memory": "lots"},
    "badtrust": {"gpucap.io/trusted": "yes"},
    "driver": {"gpucap.io/driver-limits": "auto", "gpucap.io/allow-opt-out": "true"},
    "baddriver": {"gpucap.io/driver-limits": "yes"},
    "optout": {},
}
# Labels beyond kubernetes.io/metadata.name, by namespace.
LABELS = {"optout": {"gpucap.io/allow-opt-out": "true"}}
hits = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) == 3 and parts[1] == "hits":
            with lock:
                return self.send(200, {"hits": hits.get(parts[2], 0)})
        if len(parts) != 5 or parts[1:4] != ["api", "v1", "namespaces"]:
            return self.send(404, {"kind": "Status", "code": 404})
        name = parts[4]
        with lock:
            hits[name] = hits.get(name, 0) + 1
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
        if name == "flaky":
            return self.send(503, {"kind": "Status", "code": 503, "reason": "ServiceUnavailable"})
        if name not in NAMESPACES:
            return self.send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        self.send(200, {"kind": "Namespace", "apiVersion": "v1",
                        "metadata": {"name": name, "annotations": NAMESPACES[name],
                                     "labels": {"kubernetes.io/metadata.name": name, **LABELS.get(name, {})}},
                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})

    def log_message(self, *args):
        pass


port_file, cert, key, TOKEN = sys.argv[1:5]
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
