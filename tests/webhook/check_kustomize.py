#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_kustomize.py: the kustomize overlays in examples/overlays render with `kubectl kustomize`,
and what they render is what each promises.

usage: check_kustomize.py EXAMPLES_DIR (the repository's examples/)

Every overlay renders; every object of a Kubernetes kind is valid against the three newest
Kubernetes schemas that kubernetes-validate ships, and the namespaces' Pod Security levels hold
(check_manifests.py's checks, run on the rendered output); `webhook` rewrites both images (the
webhook's, and the init container's in GPUCAP_WEBHOOK_IMAGE) and keeps every other variable of the
base; `webhook-exporter` adds the exporter and its dashboard ConfigMap; `default-budget` adds a
default budget of 25% through the default-budget component, which the base leaves out and which
combines with `live-budgets`; `namespace-annotations` turns the annotations on; each overlay's
namespace policy is its namespace-policy.ini.
Exit 77 without kubectl.
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]
import check_manifests as cm  # noqa: E402  (exits 77 itself when its modules are missing)

import yaml  # noqa: E402

from checks import by_kind, check, render, verdict  # noqa: E402


def webhook_env(docs):
    for d in docs:
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "gpucap-webhook":
            c = d["spec"]["template"]["spec"]["containers"][0]
            return c["image"], {e["name"]: e.get("value") for e in c.get("env", [])}
    check(False, "the webhook Deployment is rendered")
    return None, {}


def injected_pod():
    """A pod as the webhook leaves it (the parts the policy reads)."""
    env = [{"name": "GPUCAP_POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
           {"name": "GPUCAP_CONTAINER_NAME", "value": "train"}]
    mounts = [{"name": "gpucap-lib", "mountPath": "/usr/local/gpucap", "readOnly": True},
              {"name": "gpucap-lib", "mountPath": "/etc/gpucap/gpucap.ini", "subPath": "train/gpucap.ini", "readOnly": True}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ml", "annotations": {"gpucap.io/injected": "train"}},
            "spec": {"initContainers": [{"name": "gpucap-init", "image": "registry.example.com/gpucap/gpucap:0.1.0",
                                         "command": ["/usr/local/gpucap/bin/gpucap", "inject", "train=8GiB"]}],
                     "containers": [{"name": "train", "image": "pytorch:1", "env": env, "volumeMounts": mounts},
                                    {"name": "side", "image": "busybox"}],
                     "volumes": [{"name": "gpucap-lib", "emptyDir": {}}, {"name": "gpucap-ledger", "emptyDir": {}},
                                 {"name": "data", "emptyDir": {}}]}}


def check_admission_policy(docs):
    """The policy's CEL over updates of an injected pod: (what, change, whether it is allowed)."""
    try:
        import celpy
    except ImportError:
        print("note: cel-python is not installed; the policy's CEL not evaluated")
        return
    policies = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    bindings = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    check(len(policies) == 1 and len(bindings) == 1, "webhook-policy: one policy and its binding")
    if not policies or not bindings:
        return
    spec = policies[0]["spec"]
    check(bindings[0]["spec"]["policyName"] == policies[0]["metadata"]["name"] and
          bindings[0]["spec"]["validationActions"] == ["Deny"], "the binding denies with the policy")
    check(spec["matchConstraints"]["resourceRules"][0]["operations"] == ["UPDATE"] and
          spec["failurePolicy"] == "Fail", "the policy judges updates, failurePolicy Fail")
    env = celpy.Environment()
    compiled = lambda e: env.program(env.compile(e))
    conds = [compiled(c["expression"]) for c in spec.get("matchConditions", [])]
    variables = [(v["name"], compiled(v["expression"])) for v in spec.get("variables", [])]
    rules = [compiled(v["expression"]) for v in spec["validations"]]

    def allowed(old, new):
        act = {"object": celpy.json_to_cel(new), "oldObject": celpy.json_to_cel(old)}
        if not all(bool(c.evaluate(act)) for c in conds):
            return True
        values = celpy.celtypes.MapType({})
        for name, prog in variables:  # each may read the ones before it
            values[celpy.celtypes.StringType(name)] = prog.evaluate({**act, "variables": values})
        act["variables"] = values
        return all(bool(r.evaluate(act)) for r in rules)

    def changed(f):
        pod = injected_pod()
        new = json.loads(json.dumps(pod))
        f(new)
        return pod, new
    init = lambda p: p["spec"]["initContainers"][0]
    train = lambda p: p["spec"]["containers"][0]
    cases = [
        ("a label", lambda p: p["metadata"].setdefault("labels", {}).__setitem__("x", "y"), True),
        ("the app's image", lambda p: train(p).__setitem__("image", "pytorch:2"), True),
        ("a sidecar's image", lambda p: p["spec"]["containers"][1].__setitem__("image", "busybox:2"), True),
        ("an annotation", lambda p: p["metadata"]["annotations"].__setitem__("gpucap.io/memory", "4GiB"), True),
        ("gpucap-init's image", lambda p: init(p).__setitem__("image", "evil.example.com/gpucap:1"), False),
        ("gpucap-init's command", lambda p: init(p)["command"].__setitem__(-1, "train=100%"), False),
        ("gpucap-init removed", lambda p: p["spec"].pop("initContainers"), False),
        ("the gpucap-lib volume", lambda p: p["spec"]["volumes"][0].__setitem__("hostPath", {"path": "/"}), False),
        ("the gpucap-ledger volume removed", lambda p: p["spec"]["volumes"].pop(1), False),
        ("an identity variable", lambda p: train(p)["env"][1].__setitem__("value", "other"), False),
        ("the env removed", lambda p: train(p).pop("env"), False),
        ("a mount removed", lambda p: train(p)["volumeMounts"].pop(), False),
        ("an envFrom added", lambda p: train(p).__setitem__("envFrom", [{"configMapRef": {"name": "m"}}]), False),
        ("the gpucap.io/injected annotation removed as well as the image",
         lambda p: (p["metadata"].pop("annotations"), init(p).__setitem__("image", "x")), False),
    ]
    for what, change, want in cases:
        old, new = changed(change)
        try:
            got = allowed(old, new)
        except Exception as e:
            check(False, f"the policy's CEL fails on '{what}': {e}")
            continue
        check(got == want, f"the policy {'allows' if got else 'denies'} an update of {what}")
    # A pod gpucap did not inject is not judged; one whose annotation is gone but whose gpucap-init
    # is there still is.
    plain = injected_pod()
    plain["metadata"].pop("annotations")
    new = json.loads(json.dumps(plain))
    new["spec"]["initContainers"][0]["image"] = "x"
    check(not allowed(plain, new), "a pod with gpucap-init but without gpucap.io/injected is judged")
    plain["spec"].pop("initContainers")
    new = json.loads(json.dumps(plain))
    new["spec"]["containers"][0]["env"] = []
    check(allowed(plain, new), "a pod gpucap did not inject is not judged")


def main():
    if not shutil.which("kubectl"):
        print("kubectl is not installed; skipping")
        return 77
    examples = sys.argv[1]
    base = render(os.path.join(examples, "kubernetes"))
    _, base_env = webhook_env(base)
    check("GPUCAP_WEBHOOK_DEFAULT_MEMORY" not in base_env, "the base sets no default budget")
    versions = []
    names = sorted(os.listdir(os.path.join(examples, "overlays")))
    for name in names:
        docs = render(os.path.join(examples, "overlays", name))
        check(docs, f"overlay {name} renders objects")
        named = [(f"overlays/{name}", d) for d in docs]
        kinds = by_kind(docs)
        versions = cm.check_schemas(named)
        cm.check_pod_security(kinds, named)
        text = yaml.safe_dump_all(docs)
        check("ghcr.io/example/" not in text, f"overlay {name}: a placeholder image is left")
        image, env = webhook_env(docs)
        check(image and image.startswith("registry.example.com/gpucap/gpucap-webhook:"),
              f"overlay {name}: webhook image {image}")
        check(env.get("GPUCAP_WEBHOOK_IMAGE", "").startswith("registry.example.com/gpucap/gpucap:"),
              f"overlay {name}: init container image {env.get('GPUCAP_WEBHOOK_IMAGE')}")
        check(set(base_env) <= set(env), f"overlay {name}: variables of the base lost: {sorted(set(base_env) - set(env))}")
        for k, v in base_env.items():
            if name == "namespace-annotations" and k == "GPUCAP_WEBHOOK_NAMESPACE_ANNOTATIONS":
                check(env.get(k) == "true", "namespace-annotations: GPUCAP_WEBHOOK_NAMESPACE_ANNOTATIONS=true")
            elif k != "GPUCAP_WEBHOOK_IMAGE":
                check(env.get(k) == v, f"overlay {name}: {k} changed from {v!r} to {env.get(k)!r}")
        exporter = [d for d in kinds.get("DaemonSet", []) if d["metadata"]["name"] == "gpucap-exporter"]
        if name in ("webhook-exporter", "live-budgets"):  # live-budgets: the agent beside it
            check(len(exporter) == 1, "webhook-exporter: the exporter DaemonSet")
            for ds in exporter:
                img = ds["spec"]["template"]["spec"]["containers"][0]["image"]
                check(img.startswith("registry.example.com/gpucap/gpucap-exporter:"), f"exporter image {img}")
                check(ds["metadata"]["namespace"] == "gpucap-node", "the exporter runs in gpucap-node")
            dash = [d for d in kinds.get("ConfigMap", []) if d["metadata"]["name"] == "gpucap-grafana-dashboard"]
            check(len(dash) == 1 and dash[0]["metadata"].get("labels", {}).get("grafana_dashboard") == "1",
                  "webhook-exporter: the dashboard ConfigMap for Grafana's sidecar")
            for d in dash:
                json.loads(d["data"]["grafana-dashboard.json"])
            check("PodMonitor" in kinds and "PrometheusRule" in kinds, "webhook-exporter: PodMonitor, PrometheusRule")
        else:
            check(not exporter, f"overlay {name}: no exporter")
        vap = [d for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")]
        if name == "webhook-policy":
            check_admission_policy(docs)
        else:
            check(not vap, f"overlay {name}: no ValidatingAdmissionPolicy (optional: webhook-policy)")
        if name == "default-budget":
            check(env.get("GPUCAP_WEBHOOK_DEFAULT_MEMORY") == "25%", "default-budget: GPUCAP_WEBHOOK_DEFAULT_MEMORY=25%")
            check("../../components/default-budget" in open(os.path.join(examples, "overlays", name,
                                                                           "kustomization.yaml")).read(),
                  "default-budget: the overlay uses the default-budget component")
        else:
            check("GPUCAP_WEBHOOK_DEFAULT_MEMORY" not in env, f"overlay {name}: no default budget")
        # The namespace policy the webhook mounts is the overlay's namespace-policy.ini, and parses.
        pols = [d for d in kinds.get("ConfigMap", []) if d["metadata"]["name"] == "gpucap-namespace-policy"]
        with open(os.path.join(examples, "overlays", name, "namespace-policy.ini")) as f:
            check(len(pols) == 1 and pols[0]["data"]["policy.ini"] == f.read(),
                  f"overlay {name}: the namespace policy is not its namespace-policy.ini")
    check_default_combined(examples)
    check_burstable_combined(examples)
    return verdict(f"ok: {len(names)} overlays render; Kubernetes schemas {', '.join(versions)}")


def render_live_budgets_with(examples, component, settings):
    """The live-budgets overlay of a copy of `examples` with components/`component` added after its
    own and `settings` (lines) added to its settings.env, rendered: its components before, and the
    objects."""
    tmp = tempfile.mkdtemp()
    try:
        shutil.copytree(examples, os.path.join(tmp, "examples"))
        here = os.path.join(tmp, "examples", "overlays", "live-budgets")
        kust = os.path.join(here, "kustomization.yaml")
        with open(kust) as f:
            k = yaml.safe_load(f)
        before = list(k["components"])
        k["components"].append(f"../../components/{component}")
        with open(kust, "w") as f:
            yaml.safe_dump(k, f)
        with open(os.path.join(here, "settings.env"), "a") as f:
            f.write(settings)
        return before, render(here)
    finally:
        shutil.rmtree(tmp)


def check_default_combined(examples):
    """The default-budget component combines with live-budgets (issue 34): both render together, the
    default from DEFAULT_MEMORY of that overlay's settings.env, the agent beside the exporter."""
    _, docs = render_live_budgets_with(examples, "default-budget", "DEFAULT_MEMORY=12%\n")
    _, env = webhook_env(docs)
    check(env.get("GPUCAP_WEBHOOK_DEFAULT_MEMORY") == "12%",
          f"live-budgets with the default-budget component: default {env.get('GPUCAP_WEBHOOK_DEFAULT_MEMORY')}")
    ds = [d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "gpucap-exporter"]
    check(ds and {c["name"] for c in ds[0]["spec"]["template"]["spec"]["containers"]} == {"exporter", "agent"},
          "live-budgets with the default-budget component: the agent beside the exporter")


def check_burstable_combined(examples):
    """The burstable component (issue 35) after node-agent in live-budgets: renders, valid against the
    schemas and the namespaces' Pod Security levels; the agent arbitrates (--arbiter by its variable)
    with RECLAIM and RECLAIM_GRACE of settings.env, host PIDs, NVML, CAP_KILL and CAP_SYS_PTRACE only
    beyond its own, the state directory a host path it writes and the exporter reads read-only
    (--arbiter-state), RBAC to create pods/eviction, and the webhook's --qos from QOS."""
    before, docs = render_live_budgets_with(examples, "burstable", "RECLAIM=evict\nRECLAIM_GRACE=7\nQOS=burstable\n")
    check(before[-1] == "../../components/node-agent", f"live-budgets components {before}")
    named = [("live-budgets+burstable", d) for d in docs]
    cm.check_schemas(named)
    cm.check_pod_security(by_kind(docs), named)
    _, env = webhook_env(docs)
    check(env.get("GPUCAP_WEBHOOK_QOS") == "burstable", f"burstable: the webhook's QOS {env.get('GPUCAP_WEBHOOK_QOS')}")
    ds = [d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "gpucap-exporter"]
    check(len(ds) == 1, "burstable: the exporter's DaemonSet")
    if not ds:
        return
    pod = ds[0]["spec"]["template"]["spec"]
    ctrs = {c["name"]: c for c in pod["containers"]}
    check(set(ctrs) == {"exporter", "agent"} and pod.get("hostPID") is True,
          f"burstable: containers {sorted(ctrs)}, hostPID {pod.get('hostPID')}")
    ag, ex = ctrs.get("agent", {}), ctrs.get("exporter", {})
    aenv = {e["name"]: e.get("value") for e in ag.get("env", [])}
    want = {"GPUCAP_AGENT_ARBITER": "1", "GPUCAP_AGENT_RECLAIM": "evict", "GPUCAP_AGENT_RECLAIM_GRACE": "7",
            "GPUCAP_AGENT_STATE_DIR": "/run/gpucap", "NVIDIA_VISIBLE_DEVICES": "all"}
    check(all(aenv.get(k) == v for k, v in want.items()), f"burstable: the agent's arbiter settings {aenv}")
    caps = ag.get("securityContext", {}).get("capabilities", {})
    check(caps == {"drop": ["ALL"], "add": ["DAC_OVERRIDE", "KILL", "SYS_PTRACE"]}, f"burstable: agent caps {caps}")
    vols = {v["name"]: v for v in pod["volumes"]}
    amount = {m["mountPath"]: m for m in ag.get("volumeMounts", [])}.get("/run/gpucap", {})
    check(vols.get(amount.get("name"), {}).get("hostPath", {}).get("path") == "/run/gpucap" and
          not amount.get("readOnly"), f"burstable: the agent's state directory {amount}")
    args = ex.get("args", [])
    state = args[args.index("--arbiter-state") + 1] if "--arbiter-state" in args else None
    emount = {m["mountPath"]: m for m in ex.get("volumeMounts", [])}.get(state or "", {})
    check(state and emount.get("name") == amount.get("name") and emount.get("readOnly") is True,
          f"burstable: the exporter reads the arbiter's state read-only: {args} {ex.get('volumeMounts')}")
    roles = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "gpucap-agent"]
    check(roles and any("pods/eviction" in r.get("resources", []) and r.get("verbs") == ["create"]
                        for r in roles[0]["rules"]), "burstable: RBAC create pods/eviction")


if __name__ == "__main__":
    sys.exit(main())
