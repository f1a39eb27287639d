#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""match_conditions.py: evaluates the webhook configuration's matchConditions on pods, with cel-python.

usage: match_conditions.py MUTATINGWEBHOOK_YAML < pods.json
pods.json is a list of [label, pod] (a CREATE) or [label, pod, old pod, subresource] (an UPDATE); prints a JSON list of [label, true|false], one per pod: whether
a webhook of the configuration is called for it (its rules name the operation and the resource, and
all its conditions hold, as the API server applies them). Exit 0, 1 on a CEL error, 77
without cel-python (run by check_patch.py with the interpreter pip installed cel-python for).
"""
import json
import sys

try:
    import celpy
    import yaml
except ImportError:
    sys.exit(77)

with open(sys.argv[1]) as f:
    conf = yaml.safe_load(f)
env = celpy.Environment()
hooks = [(w, [env.program(env.compile(c["expression"])) for c in w.get("matchConditions", [])])
         for w in conf["webhooks"]]
out = []
for label, pod, *update in json.load(sys.stdin):
    old, sub = update if update else (None, "")
    request = {"operation": "UPDATE" if update else "CREATE", "subResource": sub or ""}
    res = "pods" + ("/" + sub if sub else "")
    activation = {"object": celpy.json_to_cel(pod), "oldObject": celpy.json_to_cel(old),
                  "request": celpy.json_to_cel(request)}
    out.append([label, any(any(request["operation"] in r["operations"] and res in r["resources"] for r in w["rules"])
                           and all(bool(p.evaluate(activation)) for p in programs) for w, programs in hooks)])
print(json.dumps(out))
