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
default budget of 25%, which the base leaves out; `namespace-annotations` turns the annotations on.
Exit 77 without kubectl.
"""
import json
import os
import shutil
import sys

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
        if name == "default-budget":
            check(env.get("GPUCAP_WEBHOOK_DEFAULT_MEMORY") == "25%", "default-budget: GPUCAP_WEBHOOK_DEFAULT_MEMORY=25%")
        else:
            check("GPUCAP_WEBHOOK_DEFAULT_MEMORY" not in env, f"overlay {name}: no default budget")
    return verdict(f"ok: {len(names)} overlays render; Kubernetes schemas {', '.join(versions)}")


if __name__ == "__main__":
    sys.exit(main())
