#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fake_apiserver.py PORTFILE LOG: a stand-in for the Kubernetes API server, answering gpucap-agent as
the real one does (recorded shapes: a PodList, a watch stream of JSON lines with ADDED/MODIFIED/
BOOKMARK/ERROR events, a 410 Gone as an ERROR event, an Event created with 201). Plain HTTP on
127.0.0.1; every request is logged to LOG as one JSON line: method, path, query, auth, body.

The scenario, one step per list (the agent lists again after every watch):
  list 1 (rv 100): pod train-0 with budget train=64MiB (what its file says: no change), a pod of
    another node, a pod without a record
  watch from 100: MODIFIED train-0 with train=128MiB (rv 101), a BOOKMARK (rv 102), then ERROR 410
  list 2 (rv 200): train-0 with train=32MiB (changed while the agent was not watching)
  watch from 200: the server ends it at once (its timeout)
  list 3 (rv 300): train-0 unchanged; watch from 300: ended at once
"""
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from json_server import JsonHandler, serve  # noqa: E402

NODE = "node-a"
TOKEN = "test-token-1"
UID = "0a0a0a0a-1111-4222-8333-000000000001"


def pod(budget, rv, node=NODE, uid=UID, name="train-0", record=True):
    ann = {"gpucap.io/injected": "train"}
    if record:
        ann["gpucap.io/budgets"] = json.dumps({"max": "1GiB", "containers": {"train": budget}},
                                              separators=(",", ":"))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "uid": uid, "resourceVersion": str(rv),
                         "annotations": ann},
            "spec": {"nodeName": node, "containers": [{"name": "train", "image": "x"}]},
            "status": {"phase": "Running"}}


def podlist(rv, items):
    return {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": str(rv)}, "items": items}


LISTS = [
    podlist(100, [pod("64MiB", 90), pod("8GiB", 91, node="node-b", uid="0b0b0b0b-1111-4222-8333-000000000002",
                                         name="elsewhere"),
                  pod(None, 92, uid="0c0c0c0c-1111-4222-8333-000000000003", name="plain", record=False)]),
    podlist(200, [pod("32MiB", 150)]),
    podlist(300, [pod("32MiB", 150)]),
]
WATCHES = [
    [{"type": "MODIFIED", "object": pod("128MiB", 101)},
     {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "102"}}},
     {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": "too old resource version: 102 (150)", "reason": "Expired",
                                  "code": 410}}],
    [],
    [],
]


class Handler(JsonHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes, as a watch's does
    lists = 0
    watches = 0

    def record(self, body=None):
        u = urllib.parse.urlsplit(self.path)
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps({"method": self.command, "path": u.path, "query": urllib.parse.parse_qs(u.query),
                                "auth": self.headers.get("Authorization"), "body": body}) + "\n")
        return u

    def do_GET(self):
        u = self.record()
        q = urllib.parse.parse_qs(u.query)
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.answer(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
        if u.path != "/api/v1/pods" or q.get("fieldSelector") != ["spec.nodeName=" + NODE]:
            return self.answer(404, {"kind": "Status", "code": 404})
        if q.get("watch") != ["1"]:
            n = min(Handler.lists, len(LISTS) - 1)
            Handler.lists += 1
            return self.answer(200, LISTS[n])
        n = min(Handler.watches, len(WATCHES) - 1)
        Handler.watches += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        for ev in WATCHES[n]:
            time.sleep(0.2)
            self.wfile.write((json.dumps(ev) + "\n").encode())
            self.wfile.flush()
        time.sleep(0.2)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
        u = self.record(body)
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.answer(401, {"kind": "Status", "code": 401})
        if u.path != "/api/v1/namespaces/team-a/events":
            return self.answer(404, {"kind": "Status", "code": 404})
        body["metadata"]["name"] = body["metadata"].pop("generateName", "x.") + "abcde"
        return self.answer(201, body)


serve(Handler, sys.argv[1])
