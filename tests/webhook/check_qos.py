#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""check_qos.py: the webhook's side of burstable GPU memory (issue 35), one named case per behaviour.

usage: check_qos.py ADMISSION_CLI FIXTURE_DIR CASE   (or --list)

A container's request reaches its locked ini through the init container's arguments
(`NAME=LIMIT,request=REQUEST`, which gpucap inject writes as memory_request); the budget record
(gpucap.io/budgets, what the node agent applies) keeps its format: the limits. The cases:
  - request_annotation: gpucap.io/memory-request beside gpucap.io/memory; no request, no suffix;
  - request_refused: above the limit, above the maximum, not a size: denied, saying which;
  - request_mixed_kinds: a request of bytes under a limit that is a share (or a share under a byte
    maximum): admitted, the cards where the request is above the limit (the maximum) said in the
    warnings;
  - kai_pair: Run:ai's gpu-fraction with gpu-fraction-limit, gpu-memory with gpu-memory-limit: the
    limit is the budget, the plain one the request; a limit below its request or of the other kind
    denied;
  - qos_namespace: namespace policy qos = burstable: no request means request 0 (best effort);
    qos = guaranteed overrides --qos=burstable; an unknown value is the platform's error;
  - qos_flag: --qos burstable;
  - update_request_fixed: on a running pod the request stays what the init container wrote: a
    changed or removed gpucap.io/memory-request is denied, a limit below the request is denied, a
    limit raised with the request kept is recorded (and the record stays the agent's format).
Exit 0 pass, 1 fail, 77 without jsonpatch.
"""
import copy
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_policy import (agent_reads, allowed, annotations, as_update, denied, injected, load,  # noqa: E402
                          policy_file, record_text, with_pod)
from checks import by_name, check, run_cases  # noqa: E402


def inject_args(pod):
    init = injected(pod)
    check(bool(init), "the pod has gpucap-init")
    return init[0]["command"][6:] if init else []


def annotated(fx, **ann):
    """annotated-bare (namespace ml, container train, gpucap.io/memory 8GiB) with annotations set
    (None: removed)."""
    def change(pod):
        a = annotations(pod)
        for k, v in ann.items():
            key = {"memory": "gpucap.io/memory", "request": "gpucap.io/memory-request"}.get(k, k.replace("_", "-"))
            if v is None:
                a.pop(key, None)
            else:
                a[key] = v
    return with_pod(load(fx, "annotated-bare"), change)


def request_annotation(cli, fx):
    pod, _ = allowed(cli, ["--max-memory", "60GiB"], annotated(fx, memory="40GiB", request="10GiB"), "request 10GiB")
    args = inject_args(pod)
    check("train=40GiB,request=10GiB" in args, f"gpucap inject gets train=40GiB,request=10GiB: {args}")
    got = agent_reads(record_text(pod), "request 10GiB")
    check(got == {"max": "60GiB", "containers": {"train": "40GiB"}}, f"the record keeps the agent's format: {got}")
    pod, _ = allowed(cli, ["--max-memory", "60GiB"], annotated(fx, memory="40GiB", request=" 40GiB "), "request = limit")
    check("train=40GiB,request=40GiB" in inject_args(pod), f"request = limit: {inject_args(pod)}")
    pod, _ = allowed(cli, ["--max-memory", "60GiB"], annotated(fx, memory="40GiB", request="0"), "request 0")
    check("train=40GiB,request=0" in inject_args(pod), f"request 0 (best effort): {inject_args(pod)}")
    pod, _ = allowed(cli, ["--max-memory", "60GiB"], annotated(fx, memory="40GiB"), "no request")
    check("train=40GiB" in inject_args(pod), f"no request, no suffix (guaranteed as before): {inject_args(pod)}")
    # The default budget gets the request too.
    pod, _ = allowed(cli, ["--default-memory", "30%"], annotated(fx, memory=None, request="5%"), "default + request")
    check("train=30%,request=5%" in inject_args(pod), f"the default's container gets the request: {inject_args(pod)}")


def request_refused(cli, fx):
    denied(cli, ["--max-memory", "60GiB"], annotated(fx, memory="8GiB", request="9GiB"), "request above the limit",
           ["container train requests 9GiB (annotation gpucap.io/memory-request)", "above its limit 8GiB",
            "annotation gpucap.io/memory"])
    denied(cli, ["--max-memory", "32GiB"], annotated(fx, memory="100%", request="40GiB"), "request above the maximum",
           ["requests 40GiB", "above the maximum 32GiB (cluster --max-memory)", "request 32GiB or less"])
    denied(cli, ["--max-memory", "50%"], annotated(fx, memory="50%", request="60%"), "share above the share",
           ["requests 60%", "above"])
    for bad in ("ten", "-1GiB", "1e3", "5GiB;x"):
        denied(cli, ["--max-memory", "60GiB"], annotated(fx, memory="8GiB", request=bad), f"request {bad!r}",
               ["annotation gpucap.io/memory-request", "accepted forms"])
    # A limit clamped to the maximum (a default above a namespace maximum) bounds the request too.
    with tempfile.TemporaryDirectory() as tmp:
        denied(cli, ["--default-memory", "40GiB", "--namespace-policy", policy_file(tmp, "[ml]\nmax_memory = 20GiB\n")],
               annotated(fx, memory=None, request="30GiB"), "request above a namespace maximum",
               ["requests 30GiB", "above the maximum 20GiB (namespace policy)"])


def request_mixed_kinds(cli, fx):
    pod, resp = allowed(cli, ["--max-memory", "60GiB"], annotated(fx, memory="50%", request="10GiB"), "10GiB under 50%")
    check("train=50%,request=10GiB" in inject_args(pod), f"mixed kinds admitted: {inject_args(pod)}")
    w = [x for x in resp.get("warnings", []) if "request 10GiB" in x]
    check(len(w) == 1 and "on cards under 20.00 GiB" in w[0] and "best effort" in w[0],
          f"the cards where the request is above the limit are said: {resp.get('warnings')}")
    # A share under a byte maximum: above it on large cards, where the limit is the maximum.
    _, resp = allowed(cli, ["--max-memory", "20GiB"], annotated(fx, memory="100%", request="50%"), "50% under 20GiB")
    w = [x for x in resp.get("warnings", []) if "request 50%" in x]
    check(len(w) == 1 and "above the maximum 20GiB" in w[0] and "on cards over 40.00 GiB" in w[0],
          f"the cards where the request is above the maximum are said: {resp.get('warnings')}")
    _, resp = allowed(cli, ["--max-memory", "60GiB"], annotated(fx, memory="50%", request="0"), "0 under 50%")
    check(not [x for x in resp.get("warnings", []) if "request" in x], f"request 0: no warning: {resp.get('warnings')}")


def kai_pair(cli, fx):
    def kai(**ann):
        def change(pod):
            a = annotations(pod)
            a.pop("gpu-fraction", None)
            a.update({k.replace("_", "-"): v for k, v in ann.items()})
        return with_pod(load(fx, "kai-fraction"), change)
    pod, _ = allowed(cli, [], kai(gpu_fraction="0.25", gpu_fraction_limit="0.5"), "fraction pair")
    args = inject_args(pod)
    check("trainer=50%,request=25%" in args, f"limit 50%, request 25%: {args}")
    check(not any(a.startswith("log-shipper") for a in args), f"the pair goes to KAI's container only: {args}")
    pod, _ = allowed(cli, [], kai(gpu_memory="10240", gpu_memory_limit="40960"), "memory pair")
    check("trainer=40960MiB,request=10240MiB" in inject_args(pod), f"MiB pair: {inject_args(pod)}")
    pod, _ = allowed(cli, [], kai(gpu_fraction="0.5"), "fraction alone")
    check("trainer=50%" in inject_args(pod), f"a fraction without a limit stays request = limit: {inject_args(pod)}")
    denied(cli, [], kai(gpu_fraction="0.5", gpu_fraction_limit="0.25"), "limit below request",
           ["gpu-fraction-limit", "below the request"])
    denied(cli, [], kai(gpu_memory="1000", gpu_fraction_limit="0.5"), "limit of the other kind",
           ["a limit is of the request's kind"])
    denied(cli, [], kai(gpu_fraction_limit="0.5"), "limit alone", ["gpu-fraction-limit without gpu-fraction"])
    denied(cli, ["--max-memory", "40%"], kai(gpu_fraction="0.5", gpu_fraction_limit="0.6"), "request above the maximum",
           ["above the maximum 40%"])
    # The pod's own gpucap.io/memory-request under a KAI limit: the pair's request wins (the scheduler's).
    pod, _ = allowed(cli, [], kai(gpu_fraction="0.25", gpu_fraction_limit="0.5", **{"gpucap.io/memory-request": "1%"}),
                     "pair and annotation")
    check("trainer=50%,request=25%" in inject_args(pod), f"the scheduler's pair first: {inject_args(pod)}")


def qos_namespace(cli, fx):
    with tempfile.TemporaryDirectory() as tmp:
        burst = policy_file(tempfile.mkdtemp(dir=tmp), "[ml]\nqos = burstable\n")
        pod, _ = allowed(cli, ["--namespace-policy", burst], annotated(fx, memory="40GiB"), "qos = burstable")
        check("train=40GiB,request=0" in inject_args(pod), f"no request: best effort: {inject_args(pod)}")
        pod, _ = allowed(cli, ["--namespace-policy", burst], annotated(fx, memory="40GiB", request="40GiB"),
                         "qos = burstable, request = limit")
        check("train=40GiB,request=40GiB" in inject_args(pod), f"guaranteed by its request: {inject_args(pod)}")
        other = policy_file(tempfile.mkdtemp(dir=tmp), "[other]\nqos = burstable\n")
        pod, _ = allowed(cli, ["--namespace-policy", other], annotated(fx, memory="40GiB"), "another namespace")
        check("train=40GiB" in inject_args(pod), f"another namespace's policy: unchanged: {inject_args(pod)}")
        guaranteed = policy_file(tempfile.mkdtemp(dir=tmp), "[ml]\nqos = guaranteed\n")
        pod, _ = allowed(cli, ["--qos", "burstable", "--namespace-policy", guaranteed], annotated(fx, memory="40GiB"),
                         "qos = guaranteed over --qos burstable")
        check("train=40GiB" in inject_args(pod), f"the namespace's guaranteed wins: {inject_args(pod)}")
        bad = os.path.join(tmp, "bad.ini")
        with open(bad, "w") as f:
            f.write("[ml]\nqos = sometimes\n")
        out = os.popen(f"{cli} --image x/y:1 --namespace-policy {bad} < /dev/null 2>&1").read()
        check("qos = sometimes: not burstable or guaranteed" in out, f"a bad qos in the policy file: {out!r}")


def qos_flag(cli, fx):
    pod, _ = allowed(cli, ["--qos", "burstable"], annotated(fx, memory="40GiB"), "--qos burstable")
    check("train=40GiB,request=0" in inject_args(pod), f"--qos burstable: best effort: {inject_args(pod)}")
    got = agent_reads(record_text(pod), "--qos burstable")
    check(got == {"containers": {"train": "40GiB"}}, f"the record keeps the agent's format: {got}")
    pod, _ = allowed(cli, ["--qos", "guaranteed"], annotated(fx, memory="40GiB"), "--qos guaranteed")
    check("train=40GiB" in inject_args(pod), f"--qos guaranteed: as before: {inject_args(pod)}")


def update_request_fixed(cli, fx):
    args = ["--max-memory", "60GiB"]
    review = annotated(fx, memory="20GiB", request="10GiB")
    old, _ = allowed(cli, args, review, "created with a request")

    def upd(**ann):
        new = copy.deepcopy(old)
        a = annotations(new)
        for k, v in ann.items():
            key = {"memory": "gpucap.io/memory", "request": "gpucap.io/memory-request"}[k]
            if v is None:
                a.pop(key, None)
            else:
                a[key] = v
        return as_update(review, old, new)
    denied(cli, args, upd(request="12GiB"), "request changed", ["request is fixed when the pod is created (10GiB)",
                                                                "asks for 12GiB", "recreate the pod"])
    denied(cli, args, upd(request=None), "request removed", ["fixed when the pod is created (10GiB)", "asks for none"])
    denied(cli, args, upd(memory="8GiB"), "limit below the request", ["8GiB", "above its limit"])
    new, _ = allowed(cli, args, upd(memory="30GiB"), "limit raised, request kept")
    got = agent_reads(record_text(new), "limit raised")
    check(got == {"max": "60GiB", "containers": {"train": "30GiB"}}, f"the raised limit recorded: {got}")
    # A pod created guaranteed (no request) may not gain one on a running pod; QoS turned on since
    # is not the pod's ask: its limit may still change.
    review = annotated(fx, memory="20GiB")
    old, _ = allowed(cli, args, review, "created guaranteed")
    new = copy.deepcopy(old)
    annotations(new)["gpucap.io/memory-request"] = "5GiB"
    denied(cli, args, as_update(review, old, new), "a request added", ["fixed when the pod is created (none",
                                                                     "asks for 5GiB"])
    new = copy.deepcopy(old)
    annotations(new)["gpucap.io/memory"] = "24GiB"
    allowed(cli, args + ["--qos", "burstable"], as_update(review, old, new), "QoS on since: the limit still changes")
    # Through a subresource the request annotation changes nothing.
    new = copy.deepcopy(old)
    annotations(new)["gpucap.io/memory-request"] = "5GiB"
    denied(cli, args, as_update(review, old, new, sub="status"), "request through pods/status",
           ["gpucap.io/memory-request changes a budget", "status"])


CASES = by_name(request_annotation, request_refused, request_mixed_kinds, kai_pair, qos_namespace, qos_flag,
                update_request_fixed)


if __name__ == "__main__":
    sys.exit(run_cases(CASES))
