#!/usr/bin/python3
"""check_manifests.py: every YAML file of examples/kubernetes parses, and says what the README says.

usage: check_manifests.py EXAMPLES_DIR [ADMISSION_CLI]

Each document must be a Kubernetes object (apiVersion, kind, metadata.name). The webhook
registration must carry the settings the issue asks for (v1 reviews, no side effects, a timeout,
reinvocation, a namespace opt-out, a failurePolicy, cert-manager's CA injection); the device
plugin's embedded config must give 4 replicas. With ADMISSION_CLI, the example pods go through the
webhook's handler: the hand-made pod (opt-out annotation removed) gets no patch, the time-sliced
one gets 25%. Exit 0 pass, 1 fail, 77 without python3-yaml.
"""
import base64
import glob
import json
import os
import subprocess
import shutil
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("python3-yaml is not installed; skipping")
    sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def review_of(pod):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "manifest-check", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "operation": "CREATE", "namespace": "default", "object": pod}}


def handle(cli, pod, args=()):
    args = [*args, "--default-memory", "25%"] if "--default-memory" not in args else list(args)
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


def main():
    root = sys.argv[1]
    cli = sys.argv[2] if len(sys.argv) > 2 else None
    docs = {}
    files = sorted(glob.glob(os.path.join(root, "*.yaml")))
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

    for kind in ("Namespace", "DaemonSet", "Deployment", "Service", "MutatingWebhookConfiguration",
                 "Certificate", "Issuer", "ClusterPolicy", "ConfigMap", "Pod"):
        check(kind in docs, f"a {kind} is among the manifests")

    for cfg in docs.get("MutatingWebhookConfiguration", []):
        check("cert-manager.io/inject-ca-from" in cfg["metadata"].get("annotations", {}), "CA injection annotation")
        for w in cfg["webhooks"]:
            check(w.get("admissionReviewVersions") == ["v1"], "admissionReviewVersions: [v1]")
            check(w.get("sideEffects") == "None", "sideEffects: None")
            check(isinstance(w.get("timeoutSeconds"), int) and 1 <= w["timeoutSeconds"] <= 30, "timeoutSeconds")
            check(w.get("reinvocationPolicy") == "IfNeeded", "reinvocationPolicy: IfNeeded")
            check(w.get("failurePolicy") in ("Fail", "Ignore"), "failurePolicy")
            exprs = w.get("namespaceSelector", {}).get("matchExpressions", [])
            check(any(e["key"] == "gpucap.io/inject" and e["operator"] == "NotIn" for e in exprs), "namespace opt-out")
            check(w["clientConfig"]["service"]["path"] == "/mutate", "webhook path /mutate")
            check(w["rules"][0]["resources"] == ["pods"] and w["rules"][0]["operations"] == ["CREATE"], "pod CREATE")

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
    check("ClusterRoleBinding" in docs, "the ClusterRole is bound to the webhook's ServiceAccount")

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
        check(env.get("GPUCAP_WEBHOOK_DEFAULT_MEMORY") == "25%", "webhook default budget 25% (4 replicas)")
        check(env.get("GPUCAP_WEBHOOK_IMAGE"), "webhook names the image of the init container")
        names = {v["name"] for v in dep["spec"]["template"]["spec"].get("volumes", [])}
        check("hostPath" not in json.dumps(dep), "the webhook needs no hostPath")
        check("policy" in names, "the namespace policy is mounted")
        check(c["readinessProbe"]["httpGet"]["path"] == "/healthz", "readiness probe on /healthz")

    pods = {p["metadata"]["name"]: p for p in docs.get("Pod", [])}
    if cli:
        manual = json.loads(json.dumps(pods["cuda-capped"]))
        status, resp = handle(cli, manual)
        check(status == 200 and resp["allowed"] and "patch" not in resp, "pod-manual.yaml: opted out, untouched")
        # Without the opt-out the webhook refuses a tenant's own GPUCAP_* settings.
        del manual["metadata"]["annotations"]["gpucap.io/inject"]
        status, resp = handle(cli, manual, ["--default-memory", "25%"])
        check(status == 200 and not resp["allowed"] and "GPUCAP_MEMORY_LIMIT" in resp["status"]["message"],
              f"pod-manual.yaml without the opt-out: denied, naming GPUCAP_MEMORY_LIMIT: {resp}")
        status, resp = handle(cli, pods["quarter-gpu"])
        ops = json.loads(base64.b64decode(resp["patch"]))
        check(any('=25%"' in json.dumps(o.get("value")) for o in ops), "time-slicing.yaml pod gets 25%")

    validate_schemas(docs)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print(f"ok: {len(files)} files, kinds {sorted(docs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
