#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""check_manifests.py: every YAML file of examples/kubernetes parses, and says what the README says.

usage: check_manifests.py EXAMPLES_DIR [ADMISSION_CLI [FIXTURES_DIR]]

Each document must be a Kubernetes object (apiVersion, kind, metadata.name). Built-in kinds must
validate (strict: no unknown fields) against the schemas of the last three Kubernetes minor versions
that kubernetes-validate ships; cert-manager Certificates and Issuers against the published CRD
schemas vendored in schemas/ (Issuers: the ca and selfSigned types only); Kyverno's ClusterPolicy
by the checks below only (its CRD is 1.4 MB). The webhook
registration must carry the settings the issues ask for (v1 reviews, no side effects, a timeout,
reinvocation, a namespace opt-out and the default exclusions, a failurePolicy, cert-manager's CA
injection from a CA that signs the serving certificate, matchConditions); gpucap-system must enforce
the restricted Pod Security profile and its pods meet it; a default-deny NetworkPolicy must cover
gpucap-system; the Kyverno policy must use failureAction per rule and decide on auto-generation; the
device plugin's embedded config must give 4 replicas. With ADMISSION_CLI, the example pods go through
the webhook's handler: the hand-made pod (opt-out annotation removed) gets no patch, the time-sliced
one gets 25%, and the scheduler examples (pod-kai-fraction.yaml, pod-hami.yaml) get the budgets their
comments state (`budget of `NAME`: memory_limit = SIZE`), the HAMi one with its gpucores warning; and every pod the matchConditions would not send (fixtures from FIXTURES_DIR and pods
made here; evaluated with a CEL implementation) must be one the handler admits unchanged.
Exit 0 pass, 1 fail, 77 without python3-yaml, kubernetes-validate or cel-python.
"""
import base64
import glob
import json
import os
import re
import subprocess
import shutil
import sys
import tempfile

try:
    import celpy
    import jsonschema
    import kubernetes_validate
    import kubernetes_validate.utils
    import yaml
except ImportError as e:
    print(f"{e} (tools/setup.sh installs it); skipping")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from checks import check, verdict  # noqa: E402


def review_of(pod):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "manifest-check", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "operation": "CREATE", "namespace": "default", "object": pod}}


def handle(cli, pod, args=()):
    """The handler as the example webhook with overlays/default-budget runs it (default 25%, max 50%)."""
    args = list(args) + ([] if "--default-memory" in args else ["--default-memory", "25%"]) + \
        ([] if "--max-memory" in args or "--default-memory" in args else ["--max-memory", "50%"])
    out = subprocess.run([cli, *args], input=json.dumps(review_of(pod)).encode(), capture_output=True, check=True)
    status, _, body = out.stdout.decode().partition("\n")
    return int(status), json.loads(body)["response"]


def validate_schemas(docs):
    """Built-in kinds against the newest Kubernetes schema kubernetes-validate bundles (CRDs skipped)."""
    tool = shutil.which("kubernetes-validate")
    if not tool:
        print("note: kubernetes-validate is not installed; schema validation skipped")
        return
    crds = {"Certificate", "Issuer", "ClusterPolicy"}
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for kind, items in docs.items():
            for i, d in enumerate(items):
                if kind in crds:
                    continue
                path = os.path.join(tmp, f"{kind}-{i}.json")
                with open(path, "w") as f:
                    json.dump(d, f)
                paths.append(path)
        out = subprocess.run([tool, "--strict", "--quiet", *paths], capture_output=True, text=True)
        check(out.returncode == 0, f"kubernetes-validate: {out.stdout} {out.stderr}")
def builtin(doc):
    """A kind of Kubernetes itself (core group, or a *.k8s.io group), not a custom resource."""
    group = doc["apiVersion"].rpartition("/")[0]
    return group == "" or group.endswith(".k8s.io") or "." not in group


def check_schemas(named_docs):
    versions = sorted({kubernetes_validate.utils.major_minor(v) for v in kubernetes_validate.utils.all_versions()},
                      key=lambda v: tuple(int(x) for x in v.split(".")))[-3:]
    crds = {}
    for kind in ("Certificate", "Issuer"):
        with open(os.path.join(HERE, "schemas", f"cert-manager-{kind.lower()}-v1.yaml")) as f:
            crds[kind] = yaml.safe_load(f)
    for name, d in named_docs:
        what = f"{name}: {d['kind']} {d['metadata']['name']}"
        if builtin(d):
            for v in versions:
                try:
                    kubernetes_validate.validate(d, v, strict=True)
                except Exception as e:
                    check(False, f"{what} against Kubernetes {v}: {str(e).splitlines()[0]}")
        elif d["apiVersion"] == "cert-manager.io/v1" and d["kind"] in crds:
            for e in jsonschema.Draft7Validator(crds[d["kind"]]).iter_errors(d.get("spec")):
                check(False, f"{what}: spec.{'.'.join(map(str, e.absolute_path))}: {e.message}")
    return versions


def check_certificates(docs, cfg):
    """self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate, and the CA injected."""
    issuers = {i["metadata"]["name"]: i for i in docs.get("Issuer", [])}
    certs = {c["metadata"]["name"]: c for c in docs.get("Certificate", [])}

    def issuer_of(cert):
        return issuers.get(cert["spec"]["issuerRef"]["name"], {}).get("spec", {})

    serving = certs.get("gpucap-webhook")
    check(serving is not None, "a Certificate gpucap-webhook")
    if not serving:
        return
    ca_issuer = issuer_of(serving).get("ca")
    check(ca_issuer is not None, "the serving certificate is signed by a CA Issuer")
    ca_certs = [c for c in certs.values() if ca_issuer and c["spec"].get("secretName") == ca_issuer.get("secretName")]
    check(len(ca_certs) == 1 and ca_certs[0]["spec"].get("isCA") is True, "the CA Issuer's secret comes from a "
          "CA Certificate (isCA: true)")
    if ca_certs:
        ca = ca_certs[0]
        check("selfSigned" in issuer_of(ca), "the CA Certificate is signed by a self-signed Issuer")
        check(ca["spec"].get("privateKey", {}).get("rotationPolicy") == "Never", "the CA keeps its key on renewal")
        injected = cfg["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from", "")
        check(injected == f"{ca['metadata']['namespace']}/{ca['metadata']['name']}",
              f"caBundle injected from the CA Certificate, not {injected!r}")
    check("server auth" in serving["spec"].get("usages", []), "serving certificate: usage server auth")


# Pod Security Standards, restricted profile: the rules gpucap's own pods must meet (the published
# list, minus the volume types and fields none of them use).
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret", "image"}


def restricted_violations(spec):
    out = []
    psc = spec.get("securityContext", {})
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            out.append(flag)
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {v['name']}: {sorted(kinds)}")
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        sc = c.get("securityContext", {})
        name = c["name"]
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation not false")
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            out.append(f"{name}: runAsNonRoot not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = sc.get("seccompProfile", psc.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile {seccomp}")
        caps = sc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []) or set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: capabilities")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"{name}: hostPort")
    return out


def pod_specs(named_docs, namespace):
    for name, d in named_docs:
        if d["metadata"].get("namespace") != namespace:
            continue
        if d["kind"] == "Pod":
            yield d["metadata"]["name"], d["spec"]
        elif d["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"):
            yield d["metadata"]["name"], d["spec"]["template"]["spec"]
        elif d["kind"] == "CronJob":
            yield d["metadata"]["name"], d["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def check_pod_security(docs, named_docs):
    levels = {}
    for ns in docs.get("Namespace", []):
        labels = ns["metadata"].get("labels", {})
        levels[ns["metadata"]["name"]] = labels.get("pod-security.kubernetes.io/enforce")
        for mode in ("enforce", "audit", "warn"):
            check(f"pod-security.kubernetes.io/{mode}" in labels, f"namespace {ns['metadata']['name']}: "
                  f"pod-security {mode} label")
    check(levels.get("gpucap-system") == "restricted", "gpucap-system enforces the restricted profile")
    for ns, level in levels.items():
        if level != "restricted":
            continue
        for name, spec in pod_specs(named_docs, ns):
            bad = restricted_violations(spec)
            check(not bad, f"{ns}/{name} breaks the restricted profile its namespace enforces: {bad}")


def check_network_policy(docs):
    pols = [p for p in docs.get("NetworkPolicy", []) if p["metadata"].get("namespace") == "gpucap-system"]
    deny = [p for p in pols if p["spec"].get("podSelector") == {} and not p["spec"].get("ingress")
            and not p["spec"].get("egress") and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}]
    check(len(deny) == 1, "gpucap-system: a default-deny NetworkPolicy for ingress and egress")
    ports = set()
    for dep in docs.get("Deployment", []):
        if dep["metadata"].get("namespace") == "gpucap-system":
            for c in dep["spec"]["template"]["spec"]["containers"]:
                ports |= {p["containerPort"] for p in c.get("ports", [])}
    for p in pols:
        for rule in p["spec"].get("ingress", []):
            allowed = {q.get("port") for q in rule.get("ports", [])}
            check(allowed and allowed <= ports, f"NetworkPolicy {p['metadata']['name']}: ingress only to the "
                  f"webhook's port {sorted(ports)}, not {sorted(map(str, allowed))}")
            check(rule.get("from"), f"NetworkPolicy {p['metadata']['name']}: ingress from named sources only")
        # The base's webhook connects nowhere; egress (to the API server) comes with the
        # namespace-annotations component, checked by tests/cli/check_overlay_traffic.py.
        check(not p["spec"].get("egress"), f"NetworkPolicy {p['metadata']['name']}: no egress allowed")


def check_kyverno(docs):
    for pol in docs.get("ClusterPolicy", []):
        spec = pol["spec"]
        name = pol["metadata"]["name"]
        check("validationFailureAction" not in spec and "validationFailureActionOverrides" not in spec,
              f"ClusterPolicy {name}: no deprecated spec-level validationFailureAction")
        for rule in spec["rules"]:
            if "validate" in rule:
                check(rule["validate"].get("failureAction") in ("Enforce", "Audit"),
                      f"ClusterPolicy {name}, rule {rule['name']}: validate.failureAction Enforce or Audit")
        autogen = pol["metadata"].get("annotations", {}).get("pod-policies.kyverno.io/autogen-controllers")
        check(autogen is not None, f"ClusterPolicy {name}: auto-generation for controllers decided "
              "(annotation pod-policies.kyverno.io/autogen-controllers)")


EXCLUDED_BY_DEFAULT = {"kube-system", "kube-node-lease", "kube-public", "cert-manager", "gpucap-system",
                       "gpu-operator", "nvidia-gpu-operator", "monitoring"}


def gpu_pods():
    """Pods made here: (name, pod, whether matchConditions must send it)."""
    def pod(containers, annotations=None, **spec):
        meta = {"name": "p", "namespace": "ml"}
        if annotations:
            meta["annotations"] = annotations
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": containers, **spec}}
    plain = {"name": "c", "image": "x"}
    gpu = lambda kind, res: {"name": "g", "image": "x", "resources": {kind: {res: "1"}}}
    return [
        ("plain", pod([plain]), False),
        ("cpu and memory only", pod([{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]),
         False),
        ("unrelated annotation", pod([plain], {"example.com/team": "a"}), False),
        ("env without NVIDIA_VISIBLE_DEVICES", pod([{"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}]}]),
         False),
        ("gpu limit", pod([gpu("limits", "nvidia.com/gpu")]), True),
        ("gpu request", pod([gpu("requests", "nvidia.com/gpu")]), True),
        ("shared gpu", pod([gpu("limits", "nvidia.com/gpu.shared")]), True),
        ("HAMi gpumem", pod([gpu("limits", "nvidia.com/gpumem")]), True),
        ("gpu init container", pod([plain], initContainers=[gpu("limits", "nvidia.com/gpu")]), True),
        ("DRA claim", pod([{"name": "g", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
                          resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu"}]), True),
        ("NVIDIA_VISIBLE_DEVICES", pod([{"name": "c", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES",
                                                                              "value": "all"}]}]), True),
        ("gpucap annotation", pod([plain], {"gpucap.io/memory": "4GiB"}), True),
        ("MIG device", pod([gpu("limits", "nvidia.com/mig-1g.10gb")]), True),
        ("envFrom, no prefix", pod([{"name": "c", "image": "x", "envFrom": [{"configMapRef": {"name": "m"}}]}]), True),
        ("envFrom, prefix NVIDIA_", pod([{"name": "c", "image": "x", "envFrom": [{"prefix": "NVIDIA_",
                                                                                   "secretRef": {"name": "s"}}]}]), True),
        ("envFrom, prefix APP_", pod([{"name": "c", "image": "x", "envFrom": [{"prefix": "APP_",
                                                                                "configMapRef": {"name": "m"}}]}]), False),
        ("KAI gpu-fraction", pod([plain], {"gpu-fraction": "0.5"}), True),
        ("KAI gpu-memory", pod([plain], {"gpu-memory": "2000"}), True),
    ]


def gpu_updates():
    """Updates made here: (name, old pod, new pod, subresource, whether matchConditions must send it)."""
    pods = {n: p for n, p, _ in gpu_pods()}
    injected = json.loads(json.dumps(pods["gpu limit"]))
    injected["metadata"]["annotations"] = {"gpucap.io/injected": "g", "gpucap.io/memory": "4GiB",
                                           "gpucap.io/budgets": '{"containers":{"g":"4GiB"}}'}
    injected["spec"]["initContainers"] = [{"name": "gpucap-init", "image": "registry.example.com/gpucap:1"}]
    injected["spec"]["volumes"] = [{"name": "gpucap-lib", "emptyDir": {}}, {"name": "gpucap-ledger", "emptyDir": {}}]
    kai = json.loads(json.dumps(pods["KAI gpu-fraction"]))
    kai["metadata"]["annotations"].update({"gpucap.io/injected": "c", "gpucap.io/budgets": '{"containers":{"c":"50%"}}'})
    kai["spec"]["initContainers"] = injected["spec"]["initContainers"]

    def changed(pod, *fs):
        new = json.loads(json.dumps(pod))
        for f in fs:
            f(new)
        return new
    label = lambda p: p["metadata"].setdefault("labels", {}).__setitem__("x", "y")
    ann = lambda k, v: lambda p: p["metadata"].setdefault("annotations", {}).__setitem__(k, v)
    drop = lambda k: lambda p: p["metadata"]["annotations"].pop(k)
    drop_all = lambda p: p["metadata"].pop("annotations")
    eph = lambda c: lambda p: p["spec"].__setitem__("ephemeralContainers", [c])
    init_image = lambda p: p["spec"]["initContainers"][0].__setitem__("image", "evil.example.com/gpucap:1")
    app_image = lambda p: p["spec"]["containers"][0].__setitem__("image", "y")
    status = lambda p: p.setdefault("status", {}).__setitem__("phase", "Running")
    plain = pods["plain"]
    return [
        ("a label on a GPU pod", injected, changed(injected, label), "", False),
        ("a label on a plain pod", plain, changed(plain, label), "", False),
        ("gpucap.io/memory changed", injected, changed(injected, ann("gpucap.io/memory", "6GiB")), "", True),
        ("the record rewritten", injected, changed(injected, ann("gpucap.io/budgets", "{}")), "", True),
        ("the record removed", injected, changed(injected, drop("gpucap.io/budgets")), "", True),
        ("KAI gpu-fraction added", plain, changed(plain, ann("gpu-fraction", "1")), "", True),
        ("KAI gpu-fraction raised", kai, changed(kai, ann("gpu-fraction", "0.9")), "", True),
        # Issue 30: the record through pods/status, the injected parts, every annotation removed at once.
        ("the record rewritten through pods/status", injected,
         changed(injected, ann("gpucap.io/budgets", '{"containers":{"g":"100%"}}')), "status", True),
        ("a status update", injected, changed(injected, status), "status", False),
        ("the record rewritten through pods/resize", injected, changed(injected, ann("gpucap.io/budgets", "{}")),
         "resize", True),
        ("gpucap-init's image replaced", injected, changed(injected, init_image), "", True),
        ("gpucap-init's image replaced, every annotation removed", kai, changed(kai, init_image, drop_all), "", True),
        ("gpucap-init's image replaced in a pod whose gpucap.io/injected is gone", changed(injected, drop_all),
         changed(injected, drop_all, init_image), "", True),
        ("an app container's image changed in an injected pod", injected, changed(injected, app_image), "", True),
        ("an app container's image changed in a plain pod", plain, changed(plain, app_image), "", False),
        ("ephemeral container with NVIDIA_VISIBLE_DEVICES", plain,
         changed(plain, eph({"name": "d", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]})),
         "ephemeralcontainers", True),
        ("ephemeral container with envFrom", plain,
         changed(plain, eph({"name": "d", "image": "x", "envFrom": [{"configMapRef": {"name": "m"}}]})),
         "ephemeralcontainers", True),
        ("plain ephemeral container in a plain pod", plain, changed(plain, eph({"name": "d", "image": "x"})),
         "ephemeralcontainers", False),
    ]


def bindings():
    """Bindings made here: (name, binding, whether the bindings webhook must be sent it)."""
    def binding(annotations=None):
        meta = {"name": "p", "namespace": "ml"}
        if annotations is not None:
            meta["annotations"] = annotations
        return {"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": {"kind": "Node", "name": "n1"}}
    return [
        ("a scheduler's binding", binding(), False),
        ("a binding with another annotation", binding({"example.com/x": "1"}), False),
        ("a binding that writes the record", binding({"gpucap.io/budgets": '{"containers":{"g":"100%"}}'}), True),
        ("a binding that writes gpucap.io/injected", binding({"gpucap.io/injected": ""}), True),
    ]


def programs_of(w):
    env = celpy.Environment()
    programs = []
    for c in w.get("matchConditions", []):
        try:
            programs.append((c["name"], env.program(env.compile(c["expression"]))))
        except Exception as e:
            check(False, f"matchCondition {c.get('name')}: does not compile: {e}")
    return programs


def make_sent(w):
    """sent(object, old, sub, operation): whether webhook `w` of the configuration is called for it: its
    rules name the operation and the resource, and every matchCondition holds."""
    programs = programs_of(w)

    def sent(obj, old=None, sub="", operation=None):
        operation = operation or ("UPDATE" if old else "CREATE")
        res = "pods" + ("/" + sub if sub else "")
        if not any(operation in r["operations"] and res in r["resources"] for r in w["rules"]):
            return False
        request = {"operation": operation, "subResource": sub}
        act = {"object": celpy.json_to_cel(obj), "oldObject": celpy.json_to_cel(old),
               "request": celpy.json_to_cel(request)}
        return all(bool(p.evaluate(act)) for _, p in programs)
    return sent


def check_webhook_filter(cfg, cli, fixtures):
    hooks = {w["name"]: w for w in cfg["webhooks"]}
    check(set(hooks) == {"inject.gpucap.io", "bindings.gpucap.io"}, f"the webhooks: {sorted(hooks)}")
    for w in cfg["webhooks"]:
        exprs = w.get("namespaceSelector", {}).get("matchExpressions", [])
        names = set()
        for e in exprs:
            if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn":
                names |= set(e["values"])
        check(EXCLUDED_BY_DEFAULT <= names, f"{w['name']}: namespaces excluded by default: missing "
              f"{sorted(EXCLUDED_BY_DEFAULT - names)}")
        check(len(w.get("matchConditions", [])) >= 1, f"{w['name']}: matchConditions: only what it judges is sent")
    # Every subresource whose object is a Pod and that can change its metadata or containers is in the
    # rules (issue 30); a Binding (pods/binding) goes to the second webhook, whose condition a Pod's
    # fields do not take part in.
    inject = hooks.get("inject.gpucap.io")
    if inject:
        ruled = {(op, res) for r in inject["rules"] for op in r["operations"] for res in r["resources"]}
        for want in [("CREATE", "pods"), ("UPDATE", "pods"), ("UPDATE", "pods/status"), ("UPDATE", "pods/resize"),
                     ("UPDATE", "pods/ephemeralcontainers")]:
            check(want in ruled, f"inject.gpucap.io: {want[0]} of {want[1]} is in the rules")
        check(not any(res in ("pods/binding", "pods/eviction", "pods/*") for _, res in ruled),
              "inject.gpucap.io: no rule sends objects that are not Pods (its conditions read a Pod's fields)")
        sent = make_sent(inject)
        for name, pod, want in gpu_pods():
            check(sent(pod) == want, f"matchConditions: pod '{name}' {'not ' if want else ''}sent to the webhook")
        for name, old, new, sub, want in gpu_updates():
            check(sent(new, old, sub) == want, f"matchConditions: update '{name}' {'not ' if want else ''}sent")
    bind = hooks.get("bindings.gpucap.io")
    if bind:
        check(bind.get("failurePolicy") == "Fail", "bindings.gpucap.io: failurePolicy Fail")
        check([(r["operations"], r["resources"]) for r in bind["rules"]] == [(["CREATE"], ["pods/binding"])],
              f"bindings.gpucap.io: CREATE of pods/binding only: {bind['rules']}")
        bsent = make_sent(bind)
        for name, b, want in bindings():
            check(bsent(b, None, "binding") == want, f"bindings.gpucap.io: '{name}' {'not ' if want else ''}sent")
            if cli and want:
                status, resp = handle_review(cli, binding_review(b))
                check(status == 200 and resp.get("allowed") is False, f"'{name}': the webhook denies it: {resp}")
            elif cli:
                status, resp = handle_review(cli, binding_review(b))
                check(status == 200 and resp.get("allowed") is True and "patch" not in resp,
                      f"'{name}': the webhook admits it unchanged: {resp}")
    if not cli or not inject:
        return
    # The filter may send more than the webhook changes, never less.
    pods = [(n, p) for n, p, _ in gpu_pods()]
    for path in sorted(glob.glob(os.path.join(fixtures or "", "*.json"))):
        with open(path) as f:
            review = json.load(f)
        pod = (review.get("request") or {}).get("object")
        if isinstance(pod, dict) and isinstance(pod.get("spec"), dict):
            pods.append((os.path.basename(path), pod))
    for name, pod in pods:
        try:
            if sent(pod):
                continue
        except Exception:
            continue  # fields of the wrong type: the API server would not have decoded it
        status, resp = handle(cli, pod, ["--default-memory", "25%"])
        check(status != 200 or (resp.get("allowed") and "patch" not in resp),
              f"{name}: not sent by matchConditions, but the webhook would change or deny it")
    for name, old, new, sub, want in gpu_updates():
        if want:
            continue
        status, resp = handle_review(cli, update_review(old, new, sub))
        check(status == 200 and resp.get("allowed") and "patch" not in resp,
              f"update '{name}': not sent by matchConditions, but the webhook would change or deny it: {resp}")


def binding_review(binding):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "manifest-check", "kind": {"group": "", "version": "v1", "kind": "Binding"},
                        "operation": "CREATE", "subResource": "binding", "namespace": "ml", "object": binding}}


def update_review(old, new, sub):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "manifest-check", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "operation": "UPDATE", "subResource": sub, "namespace": "ml", "object": new,
                        "oldObject": old}}


def handle_review(cli, review, args=("--default-memory", "25%")):
    out = subprocess.run([cli, *args], input=json.dumps(review).encode(), capture_output=True, check=True)
    status, _, body = out.stdout.decode().partition("\n")
    return int(status), (json.loads(body) if body else {}).get("response") or {}


def budgets_of(resp):
    """{container: budget} from the init container's arguments in the handler's patch."""
    for o in json.loads(base64.b64decode(resp.get("patch", "W10="))):
        value = o.get("value")
        init = value[0] if isinstance(value, list) and value else value
        if o["path"].startswith("/spec/initContainers") and isinstance(init, dict) and \
                init.get("name") == "gpucap-init":
            return dict(a.split("=", 1) for a in init["command"] if "=" in a)
    return {}


def check_scheduler_examples(root, cli):
    """The KAI and HAMi example pods through the handler, as the example webhook (default 25%) runs it:
    each container gets the budget its file's comment says, and nothing the comment does not say."""
    for fname in ("pod-kai-fraction.yaml", "pod-hami.yaml"):
        with open(os.path.join(root, fname)) as f:
            text = f.read()
        pod = yaml.safe_load(text)
        comments = " ".join(line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#"))
        said = dict(re.findall(r"budget of `([a-z0-9-]+)`: memory_limit = ([0-9.]+(?:%|MiB|GiB))", comments))
        check(said, f"{fname}: the comment states the budgets (budget of `NAME`: memory_limit = SIZE)")
        status, resp = handle(cli, pod)
        check(status == 200 and resp["allowed"] and budgets_of(resp) == said,
              f"{fname}: the webhook gives {budgets_of(resp)}, the comment says {said}: {resp.get('status')}")
        # "RESOURCE: "N" would give memory_limit = SIZE instead"
        for res, value, size in re.findall(r'(nvidia\.com/[a-z-]+): "(\d+)" would give memory_limit = (\S+) instead',
                                           comments):
            other = json.loads(json.dumps(pod))
            limits = other["spec"]["containers"][0]["resources"]["limits"]
            limits.pop("nvidia.com/gpumem", None)
            limits[res] = value
            _, resp2 = handle(cli, other)
            check(list(budgets_of(resp2).values()) == [size], f"{fname}: {res}: {value} gives {budgets_of(resp2)}, "
                  f"the comment says {size}")
        warned = "nvidia.com/gpucores" in json.dumps(pod["spec"])
        # Besides gpucores, only what the maximum may lower on the node (a budget in MiB under a
        # share: said with the cards where it applies).
        warnings = [w for w in resp.get("warnings", []) if "is above the maximum" not in w]
        check(len(warnings) == warned and all("nvidia.com/gpucores" in w and "not enforced" in w for w in warnings),
              f"{fname}: {'a' if warned else 'no'} gpucores warning in the response: {warnings}")
        m = re.search(r"one of (\d+%) denies this pod", comments)
        if m:
            _, resp3 = handle(cli, pod, ["--default-memory", "25%", "--max-memory", m.group(1)])
            msg = resp3.get("status", {}).get("message", "")
            check(not resp3["allowed"] and "gpu-fraction" in msg and m.group(1) in msg,
                  f"{fname}: a maximum of {m.group(1)} denies it, naming the annotation and the maximum: {msg}")


def main():
    root = sys.argv[1]
    cli = sys.argv[2] if len(sys.argv) > 2 else None
    fixtures = sys.argv[3] if len(sys.argv) > 3 else None
    docs = {}
    named = []
    # Every manifest, in subdirectories too (exporter/); kustomizations are rendered and checked by
    # tests/webhook/check_kustomize.sh, not here.
    files = sorted(f for f in glob.glob(os.path.join(root, "**", "*.yaml"), recursive=True)
                   if os.path.basename(f) != "kustomization.yaml")
    check(len(files) >= 7, f"YAML files in {root}: {files}")
    for path in files:
        try:
            with open(path) as f:
                loaded = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            check(False, f"{path}: {e}")
            continue
        for d in loaded:
            name = os.path.basename(path)
            ok = isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and (d.get("metadata") or {}).get("name")
            check(ok, f"{name}: a document is not a Kubernetes object")
            if ok:
                docs.setdefault(d["kind"], []).append(d)
                named.append((name, d))

    for kind in ("Namespace", "DaemonSet", "Deployment", "Service", "MutatingWebhookConfiguration",
                 "Certificate", "Issuer", "ClusterPolicy", "ConfigMap", "Pod", "NetworkPolicy"):
        check(kind in docs, f"a {kind} is among the manifests")
    versions = check_schemas(named)
    check_pod_security(docs, named)
    check_network_policy(docs)
    check_kyverno(docs)

    for cfg in docs.get("MutatingWebhookConfiguration", []):
        check("cert-manager.io/inject-ca-from" in cfg["metadata"].get("annotations", {}), "CA injection annotation")
        for w in cfg["webhooks"]:
            check(w.get("admissionReviewVersions") == ["v1"], "admissionReviewVersions: [v1]")
            check(w.get("sideEffects") == "None", "sideEffects: None")
            check(isinstance(w.get("timeoutSeconds"), int) and 1 <= w["timeoutSeconds"] <= 30, "timeoutSeconds")
            check(w.get("reinvocationPolicy") == ("IfNeeded" if w["name"] == "inject.gpucap.io" else "Never"),
                  f"{w['name']}: reinvocationPolicy")
            check(w.get("failurePolicy") in ("Fail", "Ignore"), "failurePolicy")
            exprs = w.get("namespaceSelector", {}).get("matchExpressions", [])
            check(any(e["key"] == "gpucap.io/inject" and e["operator"] == "NotIn" for e in exprs), "namespace opt-out")
            check(w["clientConfig"]["service"]["path"] == "/mutate", "webhook path /mutate")
        check_certificates(docs, cfg)
        check_webhook_filter(cfg, cli, fixtures)

    certs = {c["metadata"]["name"]: c for c in docs.get("Certificate", [])}
    issuers = {i["metadata"]["name"]: i for i in docs.get("Issuer", [])}
    ca = certs.get("gpucap-ca", {}).get("spec", {})
    serving = certs.get("gpucap-webhook", {}).get("spec", {})
    check(ca.get("isCA") is True and "selfSigned" in issuers.get(ca.get("issuerRef", {}).get("name"), {}).get("spec", {}),
          "a CA certificate signed by the self-signed issuer")
    check(issuers.get(serving.get("issuerRef", {}).get("name"), {}).get("spec", {}).get("ca", {}).get("secretName") ==
          ca.get("secretName"), "the serving certificate signed by the CA issuer")
    for cfg in docs.get("MutatingWebhookConfiguration", []):
        check(cfg["metadata"]["annotations"].get("cert-manager.io/inject-ca-from") == "gpucap-system/gpucap-ca",
              "caBundle from the stable CA certificate")

    for pol in docs.get("ClusterPolicy", []):
        check("validationFailureAction" not in pol["spec"], "Kyverno: no deprecated spec.validationFailureAction")
        check(all(r["validate"].get("failureAction") == "Enforce" for r in pol["spec"]["rules"] if "validate" in r),
              "Kyverno: every validate rule has failureAction: Enforce")
        check(pol["metadata"]["annotations"].get("pod-policies.kyverno.io/autogen-controllers") == "none",
              "Kyverno: auto-generation for controllers decided (none)")

    for role in docs.get("ClusterRole", []):
        check(role["rules"] == [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}],
              f"the webhook's ClusterRole grants get on namespaces only: {role['rules']}")
    # The base reads no API object: no token, no binding (components/namespace-annotations adds both).
    check("ClusterRoleBinding" in docs or "ClusterRole" not in docs, "the ClusterRole is bound to the webhook's ServiceAccount")

    for ns in docs.get("Namespace", []):
        check(ns["metadata"].get("labels", {}).get("gpucap.io/inject") == "false", "webhook namespace opted out")
        if ns["metadata"]["name"] == "gpucap-system":
            check(ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "restricted",
                  "gpucap-system enforces the restricted Pod Security level")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import pss_restricted
    for dep in docs.get("Deployment", []):
        v = pss_restricted.violations(dep["spec"]["template"])
        check(v == [], f"the webhook's pods meet the restricted level: {v}")
        check(dep["metadata"]["namespace"] == "gpucap-system", "the webhook runs in gpucap-system")
    for ds in docs.get("DaemonSet", []):
        check(ds["metadata"]["namespace"] != "gpucap-system", "the hostPath installer is not in gpucap-system")

    for cm in docs.get("ConfigMap", []):
        if cm["metadata"]["name"] == "gpucap-namespace-policy":
            # As shipped, no namespace is trusted and none may opt out: examples stay commented.
            live = [l.strip() for l in cm["data"]["policy.ini"].splitlines()
                    if l.strip() and not l.strip().startswith((";", "#"))]
            check(not any(l.replace(" ", "").lower() in ("trusted=true", "allow_opt_out=true") for l in live),
                  f"the shipped namespace policy trusts no namespace and lets none opt out: {live}")
            if cli:
                with tempfile.NamedTemporaryFile("w", suffix=".ini") as f:
                    f.write(cm["data"]["policy.ini"])
                    f.flush()
                    out = subprocess.run([cli, "--namespace-policy", f.name], input=b"{}", capture_output=True)
                    check(out.returncode == 0, f"the namespace policy ConfigMap parses: {out.stderr}")
            continue
        for text in cm.get("data", {}).values():
            plugin = yaml.safe_load(text)
            res = plugin["sharing"]["timeSlicing"]["resources"]
            check(res[0]["name"] == "nvidia.com/gpu" and res[0]["replicas"] == 4, "time-slicing: 4 replicas")

    for dep in docs.get("Deployment", []):
        c = dep["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        check("GPUCAP_WEBHOOK_DEFAULT_MEMORY" not in env and env.get("GPUCAP_WEBHOOK_MAX_MEMORY"),
              "the base webhook: no default budget (overlays/default-budget adds 25%), a cluster maximum")
        check(env.get("GPUCAP_WEBHOOK_IMAGE"), "webhook names the image of the init container")
        names = {v["name"] for v in dep["spec"]["template"]["spec"].get("volumes", [])}
        check("hostPath" not in json.dumps(dep), "the webhook needs no hostPath")
        check("policy" in names, "the namespace policy is mounted")
        check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe on /readyz")
        check(c["livenessProbe"]["httpGet"]["path"] == "/livez", "liveness probe on /livez")
        if env.get("GPUCAP_WEBHOOK_NAMESPACE_ANNOTATIONS") != "true":
            check(dep["spec"]["template"]["spec"].get("automountServiceAccountToken") is False,
                  "a webhook that reads no API object gets no API token")

    pods = {p["metadata"]["name"]: p for p in docs.get("Pod", [])}
    if cli:
        manual = json.loads(json.dumps(pods["cuda-capped"]))
        status, resp = handle(cli, manual, ["--pod-opt-out", "true"])
        check(status == 200 and resp["allowed"] and "patch" not in resp, "pod-manual.yaml: opted out, untouched")
        # Where the platform does not allow opting out, the opt-out is refused.
        status, resp = handle(cli, manual)
        check(status == 200 and not resp["allowed"] and "gpucap.io/inject" in resp["status"]["message"],
              f"pod-manual.yaml where opting out is not allowed: denied: {resp}")
        # Without the opt-out the webhook refuses a tenant's own GPUCAP_* settings.
        del manual["metadata"]["annotations"]["gpucap.io/inject"]
        status, resp = handle(cli, manual, ["--default-memory", "25%"])
        check(status == 200 and not resp["allowed"] and "GPUCAP_MEMORY_LIMIT" in resp["status"]["message"],
              f"pod-manual.yaml without the opt-out: denied, naming GPUCAP_MEMORY_LIMIT: {resp}")
        status, resp = handle(cli, pods["quarter-gpu"])
        ops = json.loads(base64.b64decode(resp["patch"]))
        check(any('=25%"' in json.dumps(o.get("value")) for o in ops), "time-slicing.yaml pod gets 25%")
        check_scheduler_examples(root, cli)

    validate_schemas(docs)
    return verdict(f"ok: {len(files)} files, kinds {sorted(docs)}; Kubernetes schemas {', '.join(versions)}")


if __name__ == "__main__":
    sys.exit(main())
