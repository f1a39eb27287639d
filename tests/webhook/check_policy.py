#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""check_policy.py: the webhook's policy decisions, one named case per behaviour.

usage: check_policy.py ADMISSION_CLI FIXTURE_DIR CASE   (or --list)

Each case builds an AdmissionReview from a fixture (tests/webhook/fixtures), sends it through the
handler (admission_cli) with the webhook arguments it names, and checks the answer: allowed or
denied with the values named, the patch applied with python3-jsonpatch, and where the pod is
mutated a second pass that adds nothing (reinvocation). UPDATE cases take the mutated pod of a
CREATE as the old object. The cases follow the issues:
  - who may leave a pod uncapped (the pod's opt-out only where the platform allows it), envFrom as
    a way to see a GPU, MIG resources, ephemeral containers, the default as the maximum (issue 23);
  - a namespace policy that cannot be read now: 503, retry (issue 24);
  - pod UPDATE: a changed budget checked again and recorded, the record the platform's (issue 26);
  - the NVIDIA driver's own limits set from the same budget, and refused from the tenant (issue 27);
  - the record, the scheduler's shares and the injected parts of a running pod, through the pod, every
    subresource and Bindings (issue 30);
  - every budget a maximum lowers said in the response's warnings, and the record what the container
    gets, as the node agent reads it (issue 34; RECORD_PARSE names tests/agent/record_parse).
Exit 0 pass, 1 fail, 77 without jsonpatch.
"""
import base64
import copy
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonpatch
except ImportError:
    print("python3-jsonpatch is not installed; skipping")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import by_name, check, run_cases  # noqa: E402

IMAGE = "ghcr.io/example/gpucap:0.1.0"


def load(fixtures, name):
    with open(os.path.join(fixtures, name + ".json")) as f:
        return json.load(f)


def match_conditions():
    """The configuration's rules and matchConditions as a function of a review (True: the API server
    sends it to the webhook), or None without cel-python."""
    try:
        import celpy
        import yaml
    except ImportError:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "../../examples/kubernetes/mutatingwebhook.yaml")) as f:
        conf = yaml.safe_load(f)
    env = celpy.Environment()
    hooks = [(w, [env.program(env.compile(c["expression"])) for c in w["matchConditions"]]) for w in conf["webhooks"]]

    def sent(review):
        req = review["request"]
        res = "pods" + ("/" + req["subResource"] if req.get("subResource") else "")
        act = {"object": celpy.json_to_cel(req["object"]), "oldObject": celpy.json_to_cel(req.get("oldObject")),
               "request": celpy.json_to_cel({"operation": req["operation"], "subResource": req.get("subResource", "")})}
        return any(any(req["operation"] in r["operations"] and res in r["resources"] for r in w["rules"]) and
                   all(bool(p.evaluate(act)) for p in programs) for w, programs in hooks)
    return sent


SENT = match_conditions()
UNNAMED_SUBRESOURCES = ("somethingnew",)


def run(cli, args, review):
    out = subprocess.run([cli, "--image", IMAGE] + args, input=json.dumps(review).encode(), capture_output=True)
    status, _, body = out.stdout.decode().partition("\n")
    check(out.returncode == 0, f"admission_cli exits 0: {out.stderr.decode()}")
    resp = (json.loads(body) if body else {}).get("response") or {}
    # What the webhook changes or refuses, the configuration's matchConditions must send it (a
    # subresource the configuration does not name yet is judged by the handler alone).
    if SENT and ("patch" in resp or resp.get("allowed") is False) and \
            review["request"].get("subResource") not in UNNAMED_SUBRESOURCES:
        check(SENT(review), f"matchConditions send this review: {out.stderr.decode().strip()}")
    return int(status or 0), resp, out.stderr.decode()


def ops_of(resp):
    return json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []


def allowed(cli, args, review, what, patched=True):
    """The review is allowed; returns the mutated pod (the input's when nothing is patched)."""
    status, resp, log = run(cli, args, review)
    check(status == 200 and resp.get("allowed") is True, f"{what}: allowed: {resp.get('status')} {log}")
    pod = review["request"]["object"]
    check(("patch" in resp) == patched, f"{what}: {'a' if patched else 'no'} patch: {ops_of(resp)}")
    if "patch" not in resp:
        return pod, resp
    mutated = jsonpatch.apply_patch(pod, ops_of(resp))
    again = copy.deepcopy(review)
    again["request"]["object"] = mutated
    _, resp2, _ = run(cli, args, again)
    check(resp2.get("allowed") is True and "patch" not in resp2, f"{what}: a second pass adds nothing: {ops_of(resp2)}")
    return mutated, resp


def denied(cli, args, review, what, fragments, code=400):
    status, resp, log = run(cli, args, review)
    msg = resp.get("status", {}).get("message", "")
    check(status == 200 and resp.get("allowed") is False and "patch" not in resp, f"{what}: denied: {resp} {log}")
    check(resp.get("status", {}).get("code") == code, f"{what}: status.code {resp.get('status', {}).get('code')}, "
                                                      f"want {code}")
    for f in fragments:
        check(f in msg, f"{what}: the denial names {f!r}: {msg!r}")
    return msg


def container(pod, name=None):
    cs = pod["spec"]["containers"]
    return cs[0] if name is None else next(c for c in cs if c["name"] == name)


def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env") or []}


def annotations(pod):
    return pod["metadata"].setdefault("annotations", {})


def injected(pod):
    return [c for c in pod["spec"].get("initContainers") or [] if c["name"] == "gpucap-init"]


def record(pod):
    text = (pod["metadata"].get("annotations") or {}).get("gpucap.io/budgets")
    return json.loads(text) if text else None


def gpu_less(fixtures, change):
    """default-budget's pod without its GPU resource, changed by `change(container)`."""
    r = load(fixtures, "default-budget")
    c = container(r["request"]["object"])
    c["resources"] = {"limits": {"memory": "16Gi"}}
    change(c)
    return r


def with_pod(review, change):
    r = copy.deepcopy(review)
    change(r["request"]["object"])
    return r


def as_update(review, old, new, sub=None):
    r = copy.deepcopy(review)
    r["request"]["operation"] = "UPDATE"
    r["request"]["oldObject"] = copy.deepcopy(old)
    r["request"]["object"] = copy.deepcopy(new)
    r["request"]["options"] = {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
    if sub:
        r["request"]["subResource"] = sub
        r["request"]["resource"]["resource"] = r["request"]["requestResource"]["resource"] = "pods"
    return r


def policy_file(tmp, text):
    path = os.path.join(tmp, "policy.ini")
    with open(path, "w") as f:
        f.write(text)
    return path


# ---- issue 23: who may leave a pod uncapped, and the ways around the cap ----

def opt_out_refused(cli, fx):
    denied(cli, ["--default-memory", "25%"], load(fx, "opt-out"), "opt-out in an ordinary namespace",
           ['gpucap.io/inject: "false" is not allowed in namespace ml', "platform"])


def opt_out_flag(cli, fx):
    allowed(cli, ["--default-memory", "25%", "--pod-opt-out", "true"], load(fx, "opt-out"), "opt-out, --pod-opt-out",
            patched=False)


def opt_out_namespace_policy(cli, fx):
    with tempfile.TemporaryDirectory() as tmp:
        allowed(cli, ["--default-memory", "25%", "--namespace-policy", policy_file(tmp, "[ml]\nallow_opt_out = true\n")],
                load(fx, "opt-out"), "opt-out allowed by the namespace policy", patched=False)
        denied(cli, ["--default-memory", "25%", "--namespace-policy", policy_file(tmp, "[other]\nallow_opt_out = true\n")],
               load(fx, "opt-out"), "opt-out allowed in another namespace only", ["not allowed in namespace ml"])


def opt_out_no_gpu(cli, fx):
    r = with_pod(load(fx, "no-gpu"), lambda pod: annotations(pod).__setitem__("gpucap.io/inject", "false"))
    allowed(cli, ["--default-memory", "25%"], r, "opt-out of a pod without a GPU", patched=False)


def envfrom_cap(cli, fx):
    r = gpu_less(fx, lambda c: c.__setitem__("envFrom", [{"configMapRef": {"name": "gpu-env"}}]))
    pod, _ = allowed(cli, ["--default-memory", "25%"], r, "envFrom could set NVIDIA_VISIBLE_DEVICES: capped")
    check(injected(pod) and env_of(container(pod)).get("GPUCAP_CONTAINER_NAME") == "train",
          "envFrom: the container carries the cap")
    # A prefix that could still make the name counts too; one that cannot does not.
    r = gpu_less(fx, lambda c: c.__setitem__("envFrom", [{"prefix": "NVIDIA_", "secretRef": {"name": "s"}}]))
    allowed(cli, ["--default-memory", "25%"], r, "envFrom prefix NVIDIA_: capped")
    r = gpu_less(fx, lambda c: c.__setitem__("envFrom", [{"prefix": "APP_", "configMapRef": {"name": "gpu-env"}}]))
    allowed(cli, ["--default-memory", "25%"], r, "envFrom prefix APP_: no GPU", patched=False)
    # An env entry wins over envFrom in the kubelet.
    r = gpu_less(fx, lambda c: (c.__setitem__("envFrom", [{"configMapRef": {"name": "gpu-env"}}]),
                                c.__setitem__("env", [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])))
    allowed(cli, ["--default-memory", "25%"], r, "envFrom with NVIDIA_VISIBLE_DEVICES=void in env: no GPU", patched=False)


def envfrom_deny(cli, fx):
    r = gpu_less(fx, lambda c: c.__setitem__("envFrom", [{"configMapRef": {"name": "gpu-env"}}]))
    denied(cli, ["--default-memory", "25%", "--visible-devices", "deny"], r, "envFrom, --visible-devices deny",
           ["container train takes envFrom[0]", "NVIDIA_VISIBLE_DEVICES", "without a cap"])
    allowed(cli, ["--default-memory", "25%", "--visible-devices", "ignore"], r, "envFrom, --visible-devices ignore",
            patched=False)


def mig_resource(cli, fx):
    r = gpu_less(fx, lambda c: c["resources"]["limits"].__setitem__("nvidia.com/mig-1g.10gb", "1"))
    pod, _ = allowed(cli, ["--default-memory", "25%"], r, "a MIG device")
    check(injected(pod) and "train=25%" in injected(pod)[0]["command"], "MIG: capped with the default")


def ephemeral(review, eph):
    old = copy.deepcopy(review["request"]["object"])
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [eph]
    return as_update(review, old, new, sub="ephemeralcontainers")


def ephemeral_containers(cli, fx):
    base = load(fx, "annotated-bare")
    pod, _ = allowed(cli, [], base, "annotated-bare")
    base["request"]["object"] = pod
    debug = {"name": "debugger", "image": "busybox", "targetContainerName": "train"}
    allowed(cli, [], ephemeral(base, debug), "a plain ephemeral container", patched=False)
    vis = dict(debug, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    denied(cli, [], ephemeral(base, vis), "ephemeral container with NVIDIA_VISIBLE_DEVICES",
           ["ephemeral container debugger sets NVIDIA_VISIBLE_DEVICES", "cannot cap an ephemeral container"])
    frm = dict(debug, envFrom=[{"configMapRef": {"name": "gpu-env"}}])
    denied(cli, [], ephemeral(base, frm), "ephemeral container with envFrom",
           ["ephemeral container debugger takes envFrom[0]"])
    mnt = dict(debug, volumeMounts=[{"name": "gpucap-lib", "mountPath": "/x"}])
    denied(cli, [], ephemeral(base, mnt), "ephemeral container mounting gpucap-lib", ["debugger", "gpucap-lib"])
    # One already in the pod is not judged again (added when the policy allowed it).
    twice = ephemeral(base, vis)
    twice["request"]["oldObject"]["spec"]["ephemeralContainers"] = [vis]
    allowed(cli, [], twice, "an ephemeral container already there", patched=False)


def ephemeral_settings(cli, fx):
    # An ephemeral container's own GPUCAP_* or driver-limit variables, by env, valueFrom or an
    # envFrom prefix, are refused as in any other container (issue 27); a trusted namespace keeps them.
    base = load(fx, "annotated-bare")
    pod, _ = allowed(cli, ["--driver-limits", "on"], base, "annotated-bare")
    base["request"]["object"] = pod
    debug = {"name": "debugger", "image": "busybox", "targetContainerName": "train"}
    for var in ("NVIDIA_GPU_MEMORY_LIMIT", "NVIDIA_GPU_MEMORY_REQUEST", "GPUCAP_MEMORY_LIMIT"):
        for entry in ({"name": var, "value": "81920"}, {"name": var, "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}):
            for mode in ("on", "off"):
                denied(cli, ["--driver-limits", mode], ephemeral(base, dict(debug, env=[entry])),
                       f"ephemeral container with {var} ({'valueFrom' if 'valueFrom' in entry else 'value'}), driver {mode}",
                       [f"ephemeral container debugger sets {var}", "belong to the platform"])
    for prefix in ("NVIDIA_GPU_MEMORY_", "NVIDIA_GPU_MEMORY_LIMIT", "GPUCAP_", "GPU"):
        denied(cli, ["--driver-limits", "on", "--visible-devices", "ignore"],
               ephemeral(base, dict(debug, envFrom=[{"prefix": prefix, "configMapRef": {"name": "m"}}])),
               f"ephemeral container with envFrom prefix {prefix}", [f'envFrom[0] with prefix "{prefix}"'])
    allowed(cli, ["--driver-limits", "on"], ephemeral(base, dict(debug, envFrom=[{"prefix": "APP_", "configMapRef": {"name": "m"}}])),
            "ephemeral container with envFrom prefix APP_", patched=False)
    allowed(cli, ["--driver-limits", "on", "--trusted-namespaces", "ml"],
            ephemeral(base, dict(debug, env=[{"name": "NVIDIA_GPU_MEMORY_LIMIT", "value": "1024"}])),
            "ephemeral container with a driver limit, trusted namespace", patched=False)


def default_is_max(cli, fx):
    args = ["--default-memory", "25%"]
    for label, change, asked, source in (
            ("gpucap.io/memory 100%", lambda pod: annotations(pod).__setitem__("gpucap.io/memory", "100%"),
             "100%", "annotation gpucap.io/memory"),
            ("KAI gpu-fraction 1", lambda pod: annotations(pod).__setitem__("gpu-fraction", "1"),
             "100%", "KAI annotation gpu-fraction")):
        denied(cli, args, with_pod(load(fx, "default-budget"), change), f"default 25%, no maximum: {label}",
               [f"asks for {asked} ({source})", "above the maximum 25% (cluster --default-memory, the maximum where "
                                                "none is set)"])
    pod, _ = allowed(cli, args, with_pod(load(fx, "default-budget"),
                                         lambda pod: annotations(pod).__setitem__("gpucap.io/memory", "10%")),
                     "default 25%, no maximum: 10% asked")
    check(injected(pod)[0]["command"][-3:] == ["--max", "25%", "train=10%"], f"--max 25%: {injected(pod)[0]['command']}")
    check(record(pod) == {"max": "25%", "containers": {"train": "10%"}}, f"record {record(pod)}")
    # The namespace default is the maximum there.
    with tempfile.TemporaryDirectory() as tmp:
        denied(cli, ["--namespace-policy", policy_file(tmp, "[ml]\ndefault_memory = 2GiB\n")],
               load(fx, "annotated-bare"), "namespace default 2GiB, no maximum: 8GiB asked",
               ["asks for 8GiB", "above the maximum 2GiB (namespace default, the maximum where none is set)"])


# ---- issue 24: a policy that cannot be read now is a 503 that says retry ----

def transient_503(cli, fx):
    # An API server that does not answer (a closed port): nothing cached, so no policy.
    args = ["--kube-api", "https://127.0.0.1:9", "--kube-token", "/dev/null", "--kube-ca", "/dev/null"]
    with tempfile.TemporaryDirectory() as tmp:
        token = os.path.join(tmp, "token")
        with open(token, "w") as f:
            f.write("t\n")
        args[3] = token
        denied(cli, args, load(fx, "annotated-bare"), "namespace policy unreachable",
               ["policy of namespace ml cannot be read now", "retry later"], code=503)
        status, resp, _ = run(cli, args, load(fx, "annotated-bare"))
        check(resp.get("status", {}).get("reason") == "ServiceUnavailable", f"reason ServiceUnavailable: {resp}")


# ---- issue 26: UPDATE of a running pod ----

def created(cli, fx, name, args):
    review = load(fx, name)
    pod, _ = allowed(cli, args, review, f"{name} created")
    return review, pod


def annotation_update(review, pod, key, value):
    """The review of an UPDATE of pod that sets its annotation key to value (None: removes it)."""
    new = copy.deepcopy(pod)
    if value is None:
        del annotations(new)[key]
    else:
        annotations(new)[key] = value
    return as_update(review, pod, new)


def update_budget(cli, fx):
    args = ["--max-memory", "10GiB"]
    review, pod = created(cli, fx, "annotated-bare", args)
    check(record(pod) == {"max": "10GiB", "containers": {"train": "8GiB"}}, f"record at CREATE: {record(pod)}")
    new, _ = allowed(cli, args, annotation_update(review, pod, "gpucap.io/memory", "9GiB"),
                     "UPDATE gpucap.io/memory 8GiB -> 9GiB")
    check(record(new) == {"max": "10GiB", "containers": {"train": "9GiB"}}, f"record after the raise: {record(new)}")
    new, _ = allowed(cli, args, annotation_update(review, pod, "gpucap.io/memory", "2GiB"),
                     "UPDATE gpucap.io/memory 8GiB -> 2GiB")
    check(record(new)["containers"] == {"train": "2GiB"}, f"record after the lowering: {record(new)}")
    denied(cli, args, annotation_update(review, pod, "gpucap.io/memory", "12GiB"),
           "UPDATE gpucap.io/memory above the maximum",
           ["container train asks for 12GiB (annotation gpucap.io/memory)", "above the maximum 10GiB"])
    denied(cli, args, annotation_update(review, pod, "gpucap.io/memory", "lots"), "UPDATE gpucap.io/memory not a size",
           ['"lots" is not a size'])
    denied(cli, [], annotation_update(review, pod, "gpucap.io/memory", None), "UPDATE removing the only budget",
           ["container train would have no budget"])


def update_kai(cli, fx):
    args = ["--max-memory", "60%", "--default-memory", "10%"]
    review, pod = created(cli, fx, "kai-fraction", args)
    check(record(pod)["containers"] == {"trainer": "50%", "log-shipper": "10%"}, f"KAI record: {record(pod)}")
    denied(cli, args, annotation_update(review, pod, "gpu-fraction", "0.7"),
           "UPDATE KAI gpu-fraction above the maximum",
           ["container trainer asks for 70% (KAI annotation gpu-fraction)", "above the maximum 60%"])
    new, _ = allowed(cli, args, annotation_update(review, pod, "gpu-fraction", "0.25"),
                     "UPDATE KAI gpu-fraction 0.5 -> 0.25")
    check(record(new)["containers"] == {"trainer": "25%", "log-shipper": "10%"}, f"record: {record(new)}")
    # gpucap's annotation comes after KAI's request, as at creation: the trainer keeps KAI's share.
    new, _ = allowed(cli, args, annotation_update(review, pod, "gpucap.io/memory", "20%"),
                     "UPDATE adding gpucap.io/memory to a KAI pod")
    check(record(new)["containers"] == {"trainer": "50%", "log-shipper": "20%"}, f"precedence: {record(new)}")


def update_record_forged(cli, fx):
    args = ["--max-memory", "10GiB"]
    review, pod = created(cli, fx, "annotated-bare", args)
    forged = copy.deepcopy(pod)
    annotations(forged)["gpucap.io/budgets"] = '{"containers":{"train":"100%"}}'
    annotations(forged)["team"] = "a"
    new, _ = allowed(cli, args, as_update(review, pod, forged), "UPDATE writing the record")
    check(record(new) == record(pod), f"the record restored: {record(new)}")
    unrelated = copy.deepcopy(pod)
    unrelated["metadata"].setdefault("labels", {})["x"] = "y"
    allowed(cli, args, as_update(review, pod, unrelated), "UPDATE of a label", patched=False)
    # A pod gpucap did not inject gets no record from its tenant.
    plain = load(fx, "no-gpu")
    old = plain["request"]["object"]
    new = copy.deepcopy(old)
    annotations(new)["gpucap.io/budgets"] = '{"containers":{"app":"100%"}}'
    annotations(new)["gpucap.io/injected"] = "app"
    got, _ = allowed(cli, args, as_update(plain, old, new), "UPDATE adding a record to a pod not injected")
    check("gpucap.io/budgets" not in annotations(got) and "gpucap.io/injected" not in annotations(got),
          f"the tenant's record removed: {annotations(got)}")
    # At CREATE the tenant's record is replaced by the webhook's.
    forged = with_pod(load(fx, "annotated-bare"),
                      lambda pod: annotations(pod).__setitem__("gpucap.io/budgets", '{"containers":{"train":"100%"}}'))
    pod, _ = allowed(cli, args, forged, "CREATE with a record")
    check(record(pod) == {"max": "10GiB", "containers": {"train": "8GiB"}}, f"CREATE record overwritten: {record(pod)}")


# ---- issue 27: the driver's own limits ----

def driver_env(pod, name=None):
    e = env_of(container(pod, name))
    return e.get("NVIDIA_GPU_MEMORY_REQUEST"), e.get("NVIDIA_GPU_MEMORY_LIMIT")


def driver_on(cli, fx):
    pod, _ = allowed(cli, ["--driver-limits", "on"], load(fx, "annotated-bare"), "driver limits on")
    check(driver_env(pod) == ("8192", "8192"), f"8GiB as whole MiB, request = limit: {driver_env(pod)}")
    check(injected(pod) and "/etc/gpucap/gpucap.ini" in [m["mountPath"] for m in container(pod)["volumeMounts"]],
          "gpucap's own cap still injected")
    pod, _ = allowed(cli, [], load(fx, "annotated-bare"), "driver limits off")
    check(driver_env(pod) == (None, None), f"off: no driver variables: {driver_env(pod)}")
    # A raise on a running pod does not reach the driver's limit (applied at container start): said.
    review, pod = created(cli, fx, "annotated-bare", ["--driver-limits", "on"])
    raised = copy.deepcopy(pod)
    annotations(raised)["gpucap.io/memory"] = "12GiB"
    _, resp = allowed(cli, ["--driver-limits", "on"], as_update(review, pod, raised), "UPDATE raise, driver limits on")
    check(any("the driver's limit stays 8192 MiB" in w for w in resp.get("warnings", [])),
          f"the raise warns that the driver's limit stays: {resp.get('warnings')}")
    r = with_pod(load(fx, "annotated-bare"), lambda p: annotations(p).__setitem__("gpucap.io/memory", "1.5GiB"))
    pod, _ = allowed(cli, ["--driver-limits", "on"], r, "driver limits on, 1.5GiB")
    check(driver_env(pod) == ("1536", "1536"), f"1.5GiB: {driver_env(pod)}")


def driver_auto(cli, fx):
    args = ["--driver-limits", "auto"]
    sel = with_pod(load(fx, "annotated-bare"),
                   lambda p: p["spec"].__setitem__("nodeSelector", {"gpucap.io/driver-limits": "true"}))
    pod, _ = allowed(cli, args, sel, "auto, nodeSelector on the label")
    check(driver_env(pod) == ("8192", "8192"), f"auto selected: {driver_env(pod)}")

    def affinity(*terms):
        return lambda p: p["spec"].__setitem__("affinity", {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}})
    good = {"matchExpressions": [{"key": "gpucap.io/driver-limits", "operator": "In", "values": ["true"]}]}
    other = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    pod, _ = allowed(cli, args, with_pod(load(fx, "annotated-bare"), affinity(good)), "auto, required affinity")
    check(driver_env(pod) == ("8192", "8192"), f"auto by affinity: {driver_env(pod)}")
    pod, _ = allowed(cli, args, with_pod(load(fx, "annotated-bare"), affinity(good, other)), "auto, one term without")
    check(driver_env(pod) == (None, None), f"auto, a term that may land elsewhere: {driver_env(pod)}")
    pod, _ = allowed(cli, args, load(fx, "annotated-bare"), "auto, no node selection")
    check(driver_env(pod) == (None, None), f"auto unselected: {driver_env(pod)}")
    custom = with_pod(load(fx, "annotated-bare"),
                      lambda p: p["spec"].__setitem__("nodeSelector", {"example.com/dmem": "true"}))
    pod, _ = allowed(cli, args + ["--driver-limits-label", "example.com/dmem"], custom, "auto, another label")
    check(driver_env(pod) == ("8192", "8192"), f"auto with --driver-limits-label: {driver_env(pod)}")
    with tempfile.TemporaryDirectory() as tmp:
        pod, _ = allowed(cli, ["--namespace-policy", policy_file(tmp, "[ml]\ndriver_limits = on\n")],
                         load(fx, "annotated-bare"), "namespace policy driver_limits = on")
        check(driver_env(pod) == ("8192", "8192"), f"namespace on: {driver_env(pod)}")
        pod, _ = allowed(cli, ["--driver-limits", "on", "--namespace-policy",
                               policy_file(tmp, "[ml]\ndriver_limits = off\n")],
                         load(fx, "annotated-bare"), "namespace policy driver_limits = off under --driver-limits on")
        check(driver_env(pod) == (None, None), f"namespace off: {driver_env(pod)}")
        out = subprocess.run([cli, "--image", IMAGE, "--namespace-policy", policy_file(tmp, "[ml]\ndriver_limits = yes\n")],
                             input=b"{}", capture_output=True)
        check(out.returncode == 1 and b"driver_limits = yes: not on, off or auto" in out.stderr,
              f"a bad driver_limits is refused at start: {out.stderr}")


def driver_not_applicable(cli, fx):
    _, resp = allowed(cli, ["--driver-limits", "on", "--default-memory", "25%"], load(fx, "default-budget"),
                      "driver limits on, a share")
    pod = jsonpatch.apply_patch(load(fx, "default-budget")["request"]["object"], ops_of(resp))
    check(driver_env(pod) == (None, None), f"a share sets no driver limit: {driver_env(pod)}")
    check(any("25% is a share of the card" in w for w in resp.get("warnings", [])), f"warned: {resp.get('warnings')}")
    mig = gpu_less(fx, lambda c: c["resources"]["limits"].__setitem__("nvidia.com/mig-1g.10gb", "1"))
    _, resp = allowed(cli, ["--driver-limits", "on", "--default-memory", "4GiB"], mig, "driver limits on, MIG")
    pod = jsonpatch.apply_patch(mig["request"]["object"], ops_of(resp))
    check(driver_env(pod) == (None, None), f"MIG sets no driver limit: {driver_env(pod)}")
    check(any("MIG" in w for w in resp.get("warnings", [])), f"MIG warned: {resp.get('warnings')}")


def driver_tenant(cli, fx):
    for mode in ("on", "off"):
        for var in ("NVIDIA_GPU_MEMORY_LIMIT", "NVIDIA_GPU_MEMORY_REQUEST"):
            r = with_pod(load(fx, "annotated-bare"),
                         lambda p: container(p).setdefault("env", []).append({"name": var, "value": "81920"}))
            denied(cli, ["--driver-limits", mode], r, f"tenant {var}, driver limits {mode}",
                   [f'container train sets {var}="81920"', "the driver's memory limits belong to the platform"])
    r = with_pod(load(fx, "annotated-bare"),
                 lambda p: container(p).__setitem__("envFrom", [{"prefix": "NVIDIA_GPU_", "configMapRef": {"name": "m"}}]))
    # An envFrom could carry them too: ours are `env` entries, which win over every envFrom.
    pod, _ = allowed(cli, ["--driver-limits", "on"], r, "tenant envFrom prefix NVIDIA_GPU_, driver limits on")
    names = [e["name"] for e in container(pod)["env"]]
    check(driver_env(pod) == ("8192", "8192") and names.count("NVIDIA_GPU_MEMORY_LIMIT") == 1,
          f"envFrom: ours set in env: {driver_env(pod)}")
    r = with_pod(load(fx, "annotated-bare"),
                 lambda p: container(p).setdefault("env", []).append({"name": "NVIDIA_GPU_MEMORY_LIMIT", "value": "1024"}))
    pod, _ = allowed(cli, ["--driver-limits", "on", "--trusted-namespaces", "ml"], r, "trusted namespace sets its own")
    check(driver_env(pod) == (None, "1024"), f"trusted: the tenant's kept, none added: {driver_env(pod)}")


def sidecar_settings(cli, fx):
    # A container or init container of a capped pod that has no GPU of its own (gpucap sets nothing
    # there, so nothing of the tenant's is overridden): its GPUCAP_* or driver-limit variables are
    # refused too (issue 27); in a pod without any GPU container they change nothing and pass.
    side = {"name": "side", "image": "busybox"}
    for field in ("containers", "initContainers"):
        for entry in ({"name": "NVIDIA_GPU_MEMORY_REQUEST", "value": "81920"},
                      {"name": "NVIDIA_GPU_MEMORY_LIMIT", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}},
                      {"name": "GPUCAP_MEMORY_LIMIT", "value": "100%"}):
            r = with_pod(load(fx, "annotated-bare"),
                         lambda p: p["spec"].setdefault(field, []).append(dict(side, env=[entry])))
            kind = "init container" if field == "initContainers" else "container"
            for mode in ("on", "off"):
                denied(cli, ["--driver-limits", mode], r, f"{kind} without a GPU sets {entry['name']}, driver {mode}",
                       [f"{kind} side sets {entry['name']}", "belong to the platform"])
    r = with_pod(load(fx, "annotated-bare"), lambda p: p["spec"]["containers"].append(
        dict(side, envFrom=[{"prefix": "NVIDIA_GPU_MEMORY_", "configMapRef": {"name": "m"}}])))
    denied(cli, ["--driver-limits", "on"], r, "container without a GPU, envFrom prefix NVIDIA_GPU_MEMORY_",
           ['container side takes envFrom[0] with prefix "NVIDIA_GPU_MEMORY_"'])
    r = with_pod(load(fx, "annotated-bare"), lambda p: p["spec"]["containers"].append(
        dict(side, env=[{"name": "NVIDIA_GPU_MEMORY_LIMIT", "value": "1024"}])))
    allowed(cli, ["--driver-limits", "on", "--trusted-namespaces", "ml"], r, "container without a GPU, trusted namespace")
    r = with_pod(load(fx, "no-gpu"), lambda p: container(p).setdefault("env", []).append({"name": "GPUCAP_LOG", "value": "debug"}))
    allowed(cli, ["--driver-limits", "on"], r, "a pod without a GPU container", patched=False)


# ---- issue 30: the record and the running pod are the platform's ----

def record_through(review, pod, sub, change):
    """An UPDATE of `pod` through subresource `sub` ("" the pod itself) that applies `change` to it."""
    new = copy.deepcopy(pod)
    change(new)
    return as_update(review, pod, new, sub=sub or None)


def forge(value):
    return lambda p: annotations(p).__setitem__("gpucap.io/budgets", value)


def update_subresources(cli, fx):
    # Every subresource that can change a pod's annotations keeps the webhook's record: pods/status,
    # pods/resize, pods/ephemeralcontainers, and any other name the API server may add; a budget
    # annotation changes through the pod itself only.
    args = ["--max-memory", "10GiB"]
    review, pod = created(cli, fx, "annotated-bare", args)
    for sub in ("status", "resize", "ephemeralcontainers") + UNNAMED_SUBRESOURCES:
        for value in ('{"containers":{"train":"100%"}}', '{"max":"1PiB","containers":{"train":"1PiB"}}', "not json"):
            got, _ = allowed(cli, args, record_through(review, pod, sub, forge(value)), f"pods/{sub} writing {value!r}")
            check(record(got) == record(pod), f"pods/{sub}: the record restored: {annotations(got)}")
        got, _ = allowed(cli, args, record_through(review, pod, sub, lambda p: annotations(p).pop("gpucap.io/budgets")),
                         f"pods/{sub} removing the record")
        check(record(got) == record(pod), f"pods/{sub}: the removed record restored: {annotations(got)}")
        got, _ = allowed(cli, args, record_through(review, pod, sub, lambda p: annotations(p).__setitem__(
            "gpucap.io/injected", "")), f"pods/{sub} emptying gpucap.io/injected")
        check(annotations(got)["gpucap.io/injected"] == "train", f"pods/{sub}: gpucap.io/injected restored")
        denied(cli, args, record_through(review, pod, sub, lambda p: annotations(p).__setitem__("gpucap.io/memory", "9GiB")),
               f"pods/{sub} changing gpucap.io/memory", ["annotation gpucap.io/memory changes a budget",
                                                        f"not of its {sub} subresource"])
    # The pod itself still may, within the maximum.
    got, _ = allowed(cli, args, annotation_update(review, pod, "gpucap.io/memory", "9GiB"), "the pod itself: 9GiB")
    check(record(got)["containers"] == {"train": "9GiB"}, f"record {record(got)}")


def binding_record(cli, fx):
    # pods/binding: a Binding's annotations are copied onto the pod.
    base = load(fx, "annotated-bare")
    for annotations_, ok in (({}, True), ({"example.com/x": "1"}, True),
                             ({"gpucap.io/budgets": '{"containers":{"train":"100%"}}'}, False),
                             ({"gpucap.io/injected": ""}, False), ({"gpucap.io/memory": "100%"}, False)):
        r = copy.deepcopy(base)
        req = r["request"]
        req["kind"] = req["requestKind"] = {"group": "", "version": "v1", "kind": "Binding"}
        req["subResource"] = "binding"
        req["object"] = {"apiVersion": "v1", "kind": "Binding",
                         "metadata": {"name": "bare", "namespace": "ml", "annotations": annotations_},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}}
        if ok:
            status, resp, log = run(cli, [], r)
            check(status == 200 and resp.get("allowed") is True and "patch" not in resp, f"binding {annotations_}: {resp}")
        else:
            denied(cli, [], r, f"binding {annotations_}", ["a Binding sets annotation gpucap.io/", "webhook only"])


def update_keeps_record(cli, fx):
    # An UPDATE with no budget change keeps the old record exactly, and none where there was none:
    # whatever a re-resolution would say now (a maximum lowered since, a policy that cannot be read).
    review, pod = created(cli, fx, "annotated-bare", ["--max-memory", "10GiB"])
    old = copy.deepcopy(pod)
    del annotations(old)["gpucap.io/budgets"]  # injected before records existed (an upgrade)
    with tempfile.TemporaryDirectory() as tmp:
        # An API server that does not answer (a closed port): the namespace's policy cannot be read.
        token = os.path.join(tmp, "token")
        with open(token, "w") as f:
            f.write("t\n")
        down = ["--kube-api", "https://127.0.0.1:9", "--kube-token", token, "--kube-ca", "/dev/null"]
        for label, args in (("same policy", ["--max-memory", "10GiB"]),
                            ("maximum lowered below the budget since", ["--max-memory", "4GiB"]),
                            ("namespace policy unreadable now", down)):
            for value in ('{"containers":{"train":"100%"}}', '{"max":"1PiB","containers":{"train":"1PiB"}}'):
                new = copy.deepcopy(old)
                forge(value)(new)
                got, _ = allowed(cli, args, as_update(review, old, new), f"pre-record pod, {label}: tenant adds {value}")
                check("gpucap.io/budgets" not in annotations(got), f"{label}: no record honoured: {annotations(got)}")
                new = copy.deepcopy(pod)
                forge(value)(new)
                got, _ = allowed(cli, args, as_update(review, pod, new), f"recorded pod, {label}: tenant writes {value}")
                check(record(got) == record(pod), f"{label}: the old record kept: {annotations(got)}")
            # A label only: the pod without a record stays without one.
            new = copy.deepcopy(old)
            new["metadata"].setdefault("labels", {})["x"] = "y"
            allowed(cli, args, as_update(review, old, new), f"pre-record pod, {label}: a label", patched=False)
        # A budget change whose resolution fails is denied, never allowed with the tenant's record.
        for label, args, fragment, code in (("above a lowered maximum", ["--max-memory", "4GiB"],
                                             "above the maximum 4GiB", 400),
                                            ("policy unreadable", down, "cannot be read now", 503)):
            new = copy.deepcopy(old)
            annotations(new)["gpucap.io/memory"] = "6GiB"
            forge('{"containers":{"train":"100%"}}')(new)
            denied(cli, args, as_update(review, old, new), f"pre-record pod, budget change, {label}", [fragment],
                   code=code)


def update_scheduler_share(cli, fx):
    # A scheduler's share (KAI) cannot raise a budget on a running pod; lowering it may.
    args = ["--max-memory", "60%", "--default-memory", "10%"]
    review = load(fx, "kai-fraction")
    annotations(review["request"]["object"])["gpu-fraction"] = "0.1"
    pod, _ = allowed(cli, args, review, "KAI pod at 0.1")
    check(record(pod)["containers"] == {"trainer": "10%", "log-shipper": "10%"}, f"record {record(pod)}")
    raises = [("gpu-fraction 0.1 -> 0.5", lambda p: annotations(p).__setitem__("gpu-fraction", "0.5"), "gpu-fraction"),
              ("gpu-fraction 0.1 -> 0.11", lambda p: annotations(p).__setitem__("gpu-fraction", "0.11"), "gpu-fraction"),
              ("gpu-fraction removed, gpucap.io/memory 50%",
               lambda p: (annotations(p).pop("gpu-fraction"), annotations(p).__setitem__("gpucap.io/memory", "50%")),
               "gpu-fraction"),
              ("gpu-fraction to gpu-memory (bytes against a share)",
               lambda p: (annotations(p).pop("gpu-fraction"), annotations(p).__setitem__("gpu-memory", "1000")),
               "gpu-fraction"),
              ("the share moved to log-shipper, trainer on gpucap.io/memory 40%",
               lambda p: (annotations(p).__setitem__("gpu-fraction-container-name", "log-shipper"),
                          annotations(p).__setitem__("gpu-fraction", "0.1"),
                          annotations(p).__setitem__("gpucap.io/memory", "40%")), "gpu-fraction-container-name")]
    for label, change, key in raises:
        new = copy.deepcopy(pod)
        change(new)
        denied(cli, args, as_update(review, pod, new), f"UPDATE {label}",
               [f"annotation {key}: a scheduler's share cannot raise a budget on a running pod"])
    for label, change, want in (("gpu-fraction 0.1 -> 0.05", lambda p: annotations(p).__setitem__("gpu-fraction", "0.05"),
                                 {"trainer": "5%", "log-shipper": "10%"}),
                                ("gpu-fraction removed, gpucap.io/memory 5%",
                                 lambda p: (annotations(p).pop("gpu-fraction"),
                                            annotations(p).__setitem__("gpucap.io/memory", "5%")),
                                 {"trainer": "5%", "log-shipper": "5%"})):
        new = copy.deepcopy(pod)
        change(new)
        got, _ = allowed(cli, args, as_update(review, pod, new), f"UPDATE {label}")
        check(record(got)["containers"] == want, f"{label}: record {record(got)}")
    # KAI's gpu-memory (MiB) the same way; gpucap's own annotation still raises within the maximum.
    review = load(fx, "kai-mib")
    pod, _ = allowed(cli, ["--max-memory", "8GiB"], review, "KAI gpu-memory pod")
    mem = annotations(pod)["gpu-memory"]
    new = copy.deepcopy(pod)
    annotations(new)["gpu-memory"] = str(int(mem) * 2)
    denied(cli, ["--max-memory", "8GiB"], as_update(review, pod, new), "UPDATE gpu-memory doubled",
           ["annotation gpu-memory: a scheduler's share cannot raise a budget"])
    new = copy.deepcopy(pod)
    annotations(new)["gpu-memory"] = str(int(mem) // 2)
    allowed(cli, ["--max-memory", "8GiB"], as_update(review, pod, new), "UPDATE gpu-memory halved")


def update_injected_parts(cli, fx):
    # The injected init container, the two volumes and the env, envFrom and mounts of the capped
    # containers cannot change on a running pod; the app's own image may.
    for preload in ("file", "env"):
        args = ["--max-memory", "10GiB", "--preload", preload, "--driver-limits", "on"]
        review, pod = created(cli, fx, "annotated-bare", args)

        def init(p):
            return injected(p)[0]
        changes = [
            ("gpucap-init's image", lambda p: init(p).__setitem__("image", "evil.example.com/gpucap:1"), "gpucap-init"),
            ("gpucap-init's command", lambda p: init(p)["command"].__setitem__(-1, "train=100%"), "gpucap-init"),
            ("gpucap-init removed", lambda p: p["spec"]["initContainers"].pop(0), "gpucap-init"),
            ("the gpucap-lib volume", lambda p: p["spec"]["volumes"][0].__setitem__("hostPath", {"path": "/x"}), "gpucap-lib"),
            ("the gpucap-ledger volume removed",
             lambda p: p["spec"].__setitem__("volumes", [v for v in p["spec"]["volumes"] if v["name"] != "gpucap-ledger"]),
             "gpucap-ledger"),
            ("an identity variable", lambda p: container(p)["env"][0].__setitem__("value", "x"), "its env"),
            ("the driver's limit", lambda p: [e.__setitem__("value", "81920") for e in container(p)["env"]
                                              if e["name"] == "NVIDIA_GPU_MEMORY_LIMIT"], "its env"),
            ("a mount removed", lambda p: container(p)["volumeMounts"].pop(), "its volumeMounts"),
            ("an envFrom added", lambda p: container(p).__setitem__("envFrom", [{"configMapRef": {"name": "m"}}]),
             "its envFrom"),
        ]
        for label, change, fragment in changes:
            new = copy.deepcopy(pod)
            change(new)
            denied(cli, args, as_update(review, pod, new), f"{preload}: UPDATE changing {label}",
                   [fragment, "cannot change"])
        new = copy.deepcopy(pod)
        container(new)["image"] = "nvcr.io/nvidia/pytorch:25.01-py3"
        allowed(cli, args, as_update(review, pod, new), f"{preload}: UPDATE of the app's image", patched=False)
        # A pod whose gpucap.io/injected is gone (a path that let it be removed): its gpucap-init holds.
        bare = copy.deepcopy(pod)
        del annotations(bare)["gpucap.io/injected"]
        new = copy.deepcopy(bare)
        init(new)["image"] = "evil.example.com/gpucap:1"
        denied(cli, args, as_update(review, bare, new), f"{preload}: gpucap-init's image, gpucap.io/injected gone",
               ["gpucap-init", "cannot change"])


# ---- issue 34: every budget a maximum lowers is said, and the record holds what the container gets ----

def agent_reads(rec_text, what):
    """The record as the node agent takes it (record_parse: record.c's strict rules), or None."""
    tool = os.environ.get("RECORD_PARSE")
    if not tool:
        return json.loads(rec_text)
    out = subprocess.run([tool], input=rec_text.encode(), capture_output=True)
    check(out.returncode == 0, f"{what}: the agent refuses the record {rec_text}: {out.stdout.decode().strip()}")
    return json.loads(out.stdout) if out.returncode == 0 else None


def record_text(pod):
    return (pod["metadata"].get("annotations") or {}).get("gpucap.io/budgets")


def clamped(cli, args, review, what, ctr, budget, maximum, fragments):
    """Allowed, one warning for container ctr naming each fragment, the budget passed to gpucap inject
    (at CREATE: a running pod's init container stays) and recorded (as the agent reads it) is
    `budget`, under the record's `maximum`."""
    pod, resp = allowed(cli, args, review, what)
    warnings = [w for w in resp.get("warnings", []) if f"container {ctr}:" in w and "maximum" in w]
    check(len(warnings) == 1, f"{what}: one warning of the maximum for {ctr}: {resp.get('warnings')}")
    for w in warnings:
        check(len(w) <= 256, f"{what}: a warning of {len(w)} characters (the API server may cut past 256)")
        for f in fragments:
            check(f in w, f"{what}: the warning names {f!r}: {w!r}")
    init = injected(pod)
    if review["request"]["operation"] == "CREATE":
        check(init and f"{ctr}={budget}" in init[0]["command"], f"{what}: gpucap inject gets {ctr}={budget}: "
              f"{init[0]['command'] if init else None}")
    got = agent_reads(record_text(pod), what)
    check(got and got["containers"].get(ctr) == budget and got.get("max") == maximum,
          f"{what}: the record (as the agent reads it) {got}: want {ctr}={budget} under max {maximum}")
    return pod, resp


def policy_files(tmp, text):
    """policy_file() in a directory of its own: several policies at once."""
    return policy_file(tempfile.mkdtemp(dir=tmp), text)


def clamp_sources(cli, fx):
    """Each source of a budget, under a maximum of the other kind: admitted (the card decides, on the
    node), and said with the cards where the maximum applies; the record keeps both, the pair the
    library takes the lower of."""
    with tempfile.TemporaryDirectory() as tmp:
        ns_max = policy_files(tmp, "[ml]\nmax_memory = 50%\n")
        cases = [
            ("annotation", [ "--max-memory", "50%"], "annotated-bare", "train", "8GiB", "50%",
             ["8GiB (annotation gpucap.io/memory)", "maximum 50% (cluster --max-memory)", "on cards under 16.00 GiB",
              "there its budget is 50%"]),
            ("KAI gpu-fraction", ["--max-memory", "10GiB"], "kai-fraction", "trainer", "50%", "10GiB",
             ["50% (KAI annotation gpu-fraction)", "maximum 10GiB", "on cards over 20.00 GiB",
              "there its budget is 10GiB"]),
            ("KAI gpu-memory", ["--max-memory", "50%"], "kai-mib", "trainer", "2000MiB", "50%",
             ["2000MiB (KAI annotation gpu-memory)", "on cards under 3.91 GiB"]),
            ("HAMi gpumem", ["--max-memory", "50%"], "hami-gpumem", "infer", "3000MiB", "50%",
             ["3000MiB (HAMi resource nvidia.com/gpumem)", "on cards under 5.86 GiB"]),
            ("HAMi gpumem-percentage", ["--max-memory", "10GiB"], "hami-gpumem-percentage", "infer", "50%", "10GiB",
             ["50% (HAMi resource nvidia.com/gpumem-percentage)", "on cards over 20.00 GiB"]),
            ("cluster default", ["--default-memory", "8GiB", "--max-memory", "50%"], "default-budget", "train",
             "8GiB", "50%", ["8GiB (cluster --default-memory)", "maximum 50% (cluster --max-memory)"]),
            ("namespace default", ["--max-memory", "50%", "--namespace-policy",
                                   policy_files(tmp, "[ml]\ndefault_memory = 8GiB\n")],
             "default-budget", "train", "8GiB", "50%", ["8GiB (namespace default)", "maximum 50%"]),
            ("namespace maximum", ["--namespace-policy", ns_max], "annotated-bare", "train", "8GiB", "50%",
             ["maximum 50% (namespace policy)"]),
            ("the default as the maximum", ["--default-memory", "25%"], "annotated-bare", "train", "8GiB", "25%",
             ["maximum 25% (cluster --default-memory, the maximum where none is set)", "on cards under 32.00 GiB"]),
        ]
        for what, args, name, ctr, budget, maximum, fragments in cases:
            clamped(cli, args, load(fx, name), f"{what} under a maximum of the other kind", ctr, budget, maximum,
                    fragments)


def clamp_default(cli, fx):
    """A default above the maximum of the same kind (the platform's two settings disagree for a
    namespace) is the maximum: the pod is admitted with that budget, said, and recorded as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("cluster default under a namespace maximum",
             ["--default-memory", "8GiB", "--namespace-policy", policy_files(tmp, "[ml]\nmax_memory = 4GiB\n")],
             "4GiB", "the default 8GiB (cluster --default-memory) is above the maximum 4GiB (namespace policy): its "
                     "budget is 4GiB"),
            ("namespace default above the cluster maximum",
             ["--max-memory", "4GiB", "--namespace-policy", policy_files(tmp, "[ml]\ndefault_memory = 6GiB\n")],
             "4GiB", "the default 6GiB (namespace default) is above the maximum 4GiB (cluster --max-memory)"),
            ("shares", ["--default-memory", "50%", "--namespace-policy", policy_files(tmp, "[ml]\nmax_memory = 25%\n")],
             "25%", "the default 50% (cluster --default-memory) is above the maximum 25% (namespace policy): its budget "
                    "is 25%"),
        ]
        for what, args, budget, fragment in cases:
            clamped(cli, args, load(fx, "default-budget"), what, "train", budget, budget, [fragment])
        # The tenant's own ask above the maximum stays a denial: the tenant changes it.
        denied(cli, ["--default-memory", "2GiB", "--namespace-policy", policy_files(tmp, "[ml]\nmax_memory = 4GiB\n")],
               load(fx, "annotated-bare"), "an annotation above the maximum",
               ["container train asks for 8GiB (annotation gpucap.io/memory), above the maximum 4GiB"])


def clamp_update(cli, fx):
    """A budget resolved again on a running pod is said as at creation, and only the new one."""
    args = ["--max-memory", "50%"]
    review, pod = created(cli, fx, "annotated-bare", args)
    new, resp = clamped(cli, args, annotation_update(review, pod, "gpucap.io/memory", "12GiB"), "UPDATE to 12GiB",
                        "train", "12GiB", "50%", ["12GiB (annotation gpucap.io/memory)", "on cards under 24.00 GiB"])
    check(not any("8GiB" in w for w in resp.get("warnings", [])), f"UPDATE: the old budget is said: {resp}")
    unrelated = copy.deepcopy(pod)
    unrelated["metadata"].setdefault("labels", {})["x"] = "y"
    _, resp = allowed(cli, args, as_update(review, pod, unrelated), "UPDATE of a label", patched=False)
    check("warnings" not in resp, f"UPDATE of a label: nothing resolved, nothing said: {resp.get('warnings')}")
    # A KAI share lowered: the old pod is resolved again to compare, and that says nothing.
    args = ["--max-memory", "10GiB"]
    review, pod = created(cli, fx, "kai-fraction", args)
    _, resp = clamped(cli, args, annotation_update(review, pod, "gpu-fraction", "0.25"), "UPDATE gpu-fraction 0.25",
                      "trainer", "25%", "10GiB", ["25% (KAI annotation gpu-fraction)", "on cards over 40.00 GiB"])
    check(not any("50%" in w for w in resp.get("warnings", [])), f"UPDATE: the old share is said: {resp}")


def clamp_quiet(cli, fx):
    """Nothing is said where no maximum can lower a budget."""
    with tempfile.TemporaryDirectory() as tmp:
        for what, args, name in (
                ("bytes under bytes", ["--max-memory", "10GiB"], "annotated-bare"),
                ("a share under a share", ["--max-memory", "60%"], "kai-fraction"),
                ("bytes under 100% (the card)", ["--max-memory", "100%"], "annotated-bare"),
                ("no maximum, no default", [], "annotated-bare"),
                ("the default at the maximum", ["--max-memory", "30%"], "default-budget"),
                ("a namespace maximum above", ["--namespace-policy", policy_files(tmp, "[ml]\nmax_memory = 9GiB\n")],
                 "annotated-bare")):
            pod, resp = allowed(cli, args, load(fx, name), what)
            check("warnings" not in resp, f"{what}: unexpected warnings {resp.get('warnings')}")
            check(agent_reads(record_text(pod), what), f"{what}: the agent reads the record")
    # A denied pod gets its denial, not warnings about what it would have had.
    status, resp, _ = run(cli, ["--default-memory", "25%"], load(fx, "opt-out"))
    check(resp.get("allowed") is False and "warnings" not in resp, f"a denial with warnings: {resp}")


CASES = by_name(opt_out_refused, opt_out_flag, opt_out_namespace_policy, opt_out_no_gpu, envfrom_cap,
                envfrom_deny, mig_resource, ephemeral_containers, ephemeral_settings, default_is_max,
                transient_503, update_budget, update_kai, update_record_forged, driver_on, driver_auto,
                driver_not_applicable, driver_tenant, sidecar_settings, update_subresources, binding_record,
                update_keeps_record, update_scheduler_share, update_injected_parts, clamp_sources,
                clamp_default, clamp_update, clamp_quiet)


if __name__ == "__main__":
    sys.exit(run_cases(CASES))
