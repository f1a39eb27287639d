#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_agent_manifests.py EXAMPLES_DIR AGENT: examples/overlays/live-budgets renders with
`kubectl kustomize`; its objects are valid against the Kubernetes schemas kubernetes-validate ships
and the namespaces' Pod Security levels hold (check_manifests.py's checks); gpucap-agent is a
second container of the exporter's DaemonSet, the only one with the service account token (a
projected volume; the pod keeps automountServiceAccountToken false) and with a writable view of the
kubelet's pod directory; its RBAC is list/watch pods and create events, nothing else; it gets its
node's name from the downward API; the pod runs in RUNTIME_CLASS of settings.env when it is set,
in none when it is empty; and the binary accepts the arguments the manifest gives it.
Exit 77 without kubectl or the Python modules check_manifests.py needs.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "webhook"), os.path.join(HERE, "..")]
import check_manifests as cm  # noqa: E402  (exits 77 itself when its modules are missing)

from checks import by_kind, check, render, verdict  # noqa: E402


def main():
    if not shutil.which("kubectl"):
        print("kubectl is not installed; skipping")
        return 77
    examples, agent = sys.argv[1], sys.argv[2]
    docs = render(os.path.join(examples, "overlays", "live-budgets"))
    named = [("overlays/live-budgets", d) for d in docs]
    kinds = by_kind(docs)
    versions = cm.check_schemas(named)
    cm.check_pod_security(kinds, named)
    ds = [d for d in kinds.get("DaemonSet", []) if d["metadata"]["name"] == "gpucap-exporter"]
    check(len(ds) == 1, "the exporter's DaemonSet")
    pod = ds[0]["spec"]["template"]["spec"]
    ctrs = {c["name"]: c for c in pod["containers"]}
    check(set(ctrs) == {"exporter", "agent"}, f"containers {sorted(ctrs)}")
    check(pod.get("automountServiceAccountToken") is False, "no token mounted by default")
    check(pod.get("serviceAccountName") == "gpucap-agent", "the pod's service account")
    vols = {v["name"]: v for v in pod["volumes"]}
    token_vols = {n for n, v in vols.items() if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))}
    check(token_vols == {"agent-token"}, f"token volumes {token_vols}")
    ex, ag = ctrs["exporter"], ctrs["agent"]
    check(all(m["name"] not in token_vols for m in ex.get("volumeMounts", [])), "the exporter mounts no token")
    check(all(m.get("readOnly") for m in ex.get("volumeMounts", [])), "the exporter's mounts are read-only")
    am = {m["name"]: m for m in ag.get("volumeMounts", [])}
    check(am.get("agent-token", {}).get("mountPath") == "/var/run/secrets/kubernetes.io/serviceaccount",
          "the agent's token where the agent reads it")
    rw = [m for m in am.values() if not m.get("readOnly")]
    check(len(rw) == 1 and vols[rw[0]["name"]].get("hostPath", {}).get("path") == "/var/lib/kubelet/pods"
          and rw[0].get("mountPropagation") == "HostToContainer", f"the agent's writable mount {rw}")
    sc = ag.get("securityContext", {})
    check(sc.get("capabilities") == {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]} and
          sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True,
          f"the agent's securityContext {sc}")
    env = {e["name"]: e for e in ag.get("env", [])}
    check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
          "NODE_NAME from the downward API")
    check(ag["image"].startswith("registry.example.com/gpucap/gpucap-exporter:"), f"agent image {ag['image']}")
    # RUNTIME_CLASS of settings.env (issue 34): shipped empty, no RuntimeClass; set, the pod's (both
    # containers run in it).
    check(pod.get("runtimeClassName") is None, f"live-budgets as shipped: runtimeClassName {pod.get('runtimeClassName')}")
    tmp = tempfile.mkdtemp()
    try:
        shutil.copytree(examples, os.path.join(tmp, "examples"))
        env = os.path.join(tmp, "examples", "overlays", "live-budgets", "settings.env")
        with open(env) as f:
            text = f.read()
        with open(env, "w") as f:
            f.write(text.replace("\nRUNTIME_CLASS=\n", "\nRUNTIME_CLASS=nvidia\n"))
        other = render(os.path.join(tmp, "examples", "overlays", "live-budgets"))
    finally:
        shutil.rmtree(tmp)
    ds2 = [d for d in other if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "gpucap-exporter"]
    check(ds2 and ds2[0]["spec"]["template"]["spec"].get("runtimeClassName") == "nvidia" and
          {c["name"] for c in ds2[0]["spec"]["template"]["spec"]["containers"]} == {"exporter", "agent"},
          "RUNTIME_CLASS=nvidia: the pod of the exporter and the agent runs in it")
    roles = [d for d in kinds.get("ClusterRole", []) if d["metadata"]["name"] == "gpucap-agent"]
    check(len(roles) == 1, "the agent's ClusterRole")
    rules = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"]))) for r in roles[0]["rules"])
    check(rules == [(("",), ("events",), ("create",)), (("",), ("pods",), ("list", "watch"))], f"rules {rules}")
    binds = [d for d in kinds.get("ClusterRoleBinding", []) if d["roleRef"]["name"] == "gpucap-agent"]
    check(len(binds) == 1 and binds[0]["subjects"] == [{"kind": "ServiceAccount", "name": "gpucap-agent",
                                                       "namespace": "gpucap-node"}], "the binding")
    # The binary takes the manifest's arguments (it stops at the missing API address, not at them).
    run = subprocess.run([agent] + ag.get("args", []), capture_output=True, text=True,
                         env={"NODE_NAME": "node-a", "PATH": os.environ.get("PATH", "")})
    check("unknown option" not in run.stderr and "no --kube-api and no KUBERNETES_SERVICE_HOST" in run.stderr,
          f"the agent's arguments: {run.stderr.strip()}")
    return verdict(f"ok: live-budgets renders; Kubernetes schemas {', '.join(versions)}")


sys.exit(main())
