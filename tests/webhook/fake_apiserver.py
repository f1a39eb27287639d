#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""fake_apiserver.py: a Kubernetes API server reduced to GET /api/v1/namespaces/NAME, over TLS on loopback.

usage: fake_apiserver.py PORT_FILE CERT KEY TOKEN
Serves the Namespace objects below with their gpucap.io/* annotations, only to a client that sends
"Authorization: Bearer TOKEN" (401 otherwise, 404 for an unknown name, 503 for "flaky"), and GET /hits/NAME: how
many times NAME was fetched (for the cache test). Writes the port it listens on to PORT_FILE.
"""
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from json_server import JsonHandler, serve  # noqa: E402

NAMESPACES = {
    "ml": {"gpucap.io/max-memory": "4GiB", "gpucap.io/default-memory": "2GiB"},
    "research": {"gpucap.io/trusted": "true"},
    "open": {},
    "typo": {"gpucap.io/max-memory": "lots"},
    "badtrust": {"gpucap.io/trusted": "yes"},
    "driver": {"gpucap.io/driver-limits": "auto", "gpucap.io/allow-opt-out": "true"},
    "baddriver": {"gpucap.io/driver-limits": "yes"},
    "optout": {},
    "burst": {"gpucap.io/qos": "burstable"},
    "badqos": {"gpucap.io/qos": "sometimes"},
}
# Labels beyond kubernetes.io/metadata.name, by namespace.
LABELS = {"optout": {"gpucap.io/allow-opt-out": "true"}}
hits = {}
lock = threading.Lock()


class Handler(JsonHandler):
    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) == 3 and parts[1] == "hits":
            with lock:
                return self.answer(200, {"hits": hits.get(parts[2], 0)})
        if len(parts) != 5 or parts[1:4] != ["api", "v1", "namespaces"]:
            return self.answer(404, {"kind": "Status", "code": 404})
        name = parts[4]
        with lock:
            hits[name] = hits.get(name, 0) + 1
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.answer(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
        if name == "flaky":
            return self.answer(503, {"kind": "Status", "code": 503, "reason": "ServiceUnavailable"})
        if name not in NAMESPACES:
            return self.answer(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        self.answer(200, {"kind": "Namespace", "apiVersion": "v1",
                          "metadata": {"name": name, "annotations": NAMESPACES[name],
                                       "labels": {"kubernetes.io/metadata.name": name, **LABELS.get(name, {})}},
                          "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})


port_file, cert, key, TOKEN = sys.argv[1:5]
serve(Handler, port_file, cert, key)
