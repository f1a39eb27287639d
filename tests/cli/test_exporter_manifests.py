#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""test_exporter_manifests.py EXPORTER EXAMPLES_DIR: the exporter's Kubernetes manifests, alert rules
and Grafana dashboard load and fit together: the DaemonSet mounts the kubelet's pod directory
read-only where --root points, the PodMonitor scrapes its port with the tenant's labels kept, the
PrometheusRule's groups are the plain rules file's (prometheus-rules.rules.yml), which passes
`promtool check rules` and its unit tests (`promtool test rules`) as it is; every alert has its
runbook (docs/runbooks.md) and says whose it is (a tenant's own budget: info, audience tenant); the
HAMi recording rules carry HAMi's labels, vdeviceid included; the dashboard has its panels (usage
against budget, denials, budgets against the card), and every gpucap_* metric the rules and
dashboard query is one the exporter serves."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, load_yaml, verdict  # noqa: E402

exporter, examples = sys.argv[1], sys.argv[2]
if not shutil.which("promtool"):
    print("SKIP: promtool (Debian package prometheus) is missing")
    sys.exit(77)


def load_all(name):
    return load_yaml(os.path.join(examples, name))


# The metric families the exporter serves: an empty root still prints every HELP/TYPE.
tmp = tempfile.mkdtemp()
try:
    out = subprocess.run([exporter, "--once", "--root", tmp], capture_output=True, text=True, check=True).stdout
    families = set(re.findall(r"^# TYPE (\S+) ", out, re.M))
    # The webhook's own families (served on its /metrics), from its source, and the recording rules.
    server_c = os.path.join(examples, "..", "..", "..", "tools", "webhook", "server.c")
    families |= set(re.findall(r'gpc_prom_family\(&t, "(gpucap_webhook_[a-z_]+)"', open(server_c).read()))
    check("gpucap_container_used_bytes" in families, f"exporter families: {sorted(families)}")

    # DaemonSet, Service, ServiceAccount.
    docs = {d["kind"]: d for d in load_all("exporter.yaml")}
    ds = docs.get("DaemonSet")
    check(ds is not None and "Service" in docs and "ServiceAccount" in docs, f"exporter.yaml kinds: {list(docs)}")
    pod = ds["spec"]["template"]["spec"]
    check(pod.get("automountServiceAccountToken") is False, "the exporter must not get an API token")
    # The RuntimeClass is the overlay's RUNTIME_CLASS (cluster-settings): none in the base.
    check("runtimeClassName" not in pod, f"the base DaemonSet names a RuntimeClass: {pod.get('runtimeClassName')}")
    vols = {v["name"]: v for v in pod["volumes"]}
    ctr = pod["containers"][0]
    mounts = {m["name"]: m for m in ctr["volumeMounts"]}
    host = [n for n, v in vols.items() if v.get("hostPath", {}).get("path") == "/var/lib/kubelet/pods"]
    check(len(host) == 1, "no hostPath of /var/lib/kubelet/pods")
    m = mounts.get(host[0]) if host else None
    check(m is not None and m.get("readOnly") is True, f"the kubelet pod directory is not mounted read-only: {m}")
    args = ctr.get("args", [])
    check(m is not None and "--root" in args and args[args.index("--root") + 1] == m["mountPath"],
          f"--root {args} is not the mount {m}")
    sc = ctr["securityContext"]
    check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False and
          sc["capabilities"]["drop"] == ["ALL"] and sc["capabilities"].get("add") == ["DAC_READ_SEARCH"],
          f"securityContext: {sc}")
    port = ctr["ports"][0]
    check(port["name"] == "metrics" and port["containerPort"] == 9477, f"port: {port}")
    check(any(p["targetPort"] == "metrics" for p in docs["Service"]["spec"]["ports"]), "Service port")
    labels = ds["spec"]["template"]["metadata"]["labels"]
    check(docs["Service"]["spec"]["selector"].items() <= labels.items(), "Service selector")

    pm = load_all("podmonitor.yaml")[0]
    check(pm["kind"] == "PodMonitor" and pm["spec"]["selector"]["matchLabels"].items() <= labels.items(),
          "PodMonitor selector")
    ep = pm["spec"]["podMetricsEndpoints"][0]
    check(ep["port"] == "metrics" and ep.get("honorLabels") is True, f"PodMonitor endpoint: {ep}")

    # Alert rules: the PrometheusRule, and the plain rules file made from it for Prometheus without
    # the operator, the same groups (tools/prometheus-rules-file.py --check: as the tool writes it),
    # through promtool as they are, and their unit tests.
    rule = load_all("prometheus-rules.yaml")[0]
    check(rule["kind"] == "PrometheusRule", "prometheus-rules.yaml kind")
    groups = rule["spec"]["groups"]
    plain = os.path.join(examples, "prometheus-rules.rules.yml")
    with open(plain) as f:
        check(yaml.safe_load(f) == {"groups": groups},
              "prometheus-rules.rules.yml is not the PrometheusRule's spec.groups: run tools/prometheus-rules-file.py")
    repo = os.path.join(examples, "..", "..", "..")
    r = subprocess.run([sys.executable, os.path.join(repo, "tools", "prometheus-rules-file.py"), "--check"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"prometheus-rules.rules.yml is not what the tool writes: {r.stdout}{r.stderr}")
    unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exporter_rules_test.yaml")
    with open(unit) as f:
        files = [os.path.normpath(os.path.join(os.path.dirname(unit), x)) for x in yaml.safe_load(f)["rule_files"]]
    check(files == [os.path.normpath(plain)], f"exporter_rules_test.yaml reads {files}, not the plain rules file")
    for cmd in (["promtool", "check", "rules", plain], ["promtool", "test", "rules", unit]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        check(r.returncode == 0, f"{' '.join(cmd)}: {r.stdout}{r.stderr}")
    alerts = {r["alert"]: r["expr"] for g in groups for r in g["rules"] if "alert" in r}
    rules = [r for g in groups for r in g["rules"] if "alert" in r]

    # Every alert has its runbook: a section of docs/runbooks.md named as the alert, saying what it
    # means and what to do; every section is an alert's.
    with open(os.path.join(repo, "docs", "runbooks.md")) as f:
        runbooks = f.read()
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", runbooks, re.M | re.S))
    tested = open(unit).read()
    for a in rules:
        name, url = a["alert"], a.get("annotations", {}).get("runbook_url", "")
        check(url.endswith("docs/runbooks.md#" + name.lower()) and url.startswith("https://"),
              f"{name}: runbook_url {url!r} is not RUNBOOK_URL#{name.lower()}")
        body = sections.get(name, "")
        check("**What it means.**" in body and "**What to do.**" in body,
              f"{name}: no section in docs/runbooks.md saying what it means and what to do")
        check(f"alertname: {name}\n" in tested and f"#{name.lower()}" in tested,
              f"{name}: not fired by exporter_rules_test.yaml with its labels and annotations")
    check(set(sections) == {a["alert"] for a in rules},
          f"runbook sections without an alert: {sorted(set(sections) - {a['alert'] for a in rules})}")
    # Whose alert: a container at or over its own budget is its tenant's business (info, never a
    # page; routed by namespace); the rest is the platform's. The class: any alert on one container's
    # figures (grouped by container, or on gpucap_container_* series).
    for a in rules:
        labels = a.get("labels", {})
        own = bool(re.search(r"\bby \([^)]*\bcontainer\b", a["expr"])) or "gpucap_container_" in a["expr"]
        want = ("info", "tenant") if own else (labels.get("severity"), "platform")
        check((labels.get("severity"), labels.get("audience")) == want and labels.get("severity") in
              ("info", "warning", "critical"),
              f"{a['alert']}: severity {labels.get('severity')}, audience {labels.get('audience')}: want {want}")
        if own:
            check("namespace" in re.search(r"\bby \(([^)]*)\)", a["expr"]).group(1),
                  f"{a['alert']}: a tenant's alert without its namespace, which routing needs")
    records = {r["record"]: r["expr"] for g in groups for r in g["rules"] if "record" in r}
    families |= set(records)
    check("release" in rule["metadata"].get("labels", {}), "PrometheusRule without the release label")
    check("release" in pm["metadata"].get("labels", {}), "PodMonitor without the release label")
    for a in ("GpucapExporterDown", "GpucapExporterMissing", "GpucapExporterScrapeErrors", "GpucapContainerNearBudget"):
        check(a in alerts, f"no alert {a}")
    check('mode="enforce"' in alerts.get("GpucapDenials", ""), "GpucapDenials must count enforcing containers only")
    check("absent(" in alerts.get("GpucapExporterMissing", ""), "GpucapExporterMissing must use absent()")
    check("gpucap_gpu_used_bytes" in records, "the old name gpucap_gpu_used_bytes is not kept by a recording rule")
    check(any("DCGM_FI_DEV_FB_USED" in e for e in records.values()), "no recording rule joins DCGM's series")
    hami = [e for e in records.values() if "deviceuuid" in e]
    check(hami and all(all(f'"{label}"' in e for label in ("podnamespace", "podname", "ctrname", "vdeviceid",
                                                            "deviceuuid")) for e in hami),
          "the HAMi recording rules lack one of HAMi's labels (podnamespace, podname, ctrname, vdeviceid, deviceuuid)")
    check("GpucapDenials" in alerts and "gpucap_container_denials_total" in alerts["GpucapDenials"],
          "no alert on denials")
    check("GpucapBudgetsExceedCard" in alerts and "gpucap_gpu_budgets_bytes" in alerts["GpucapBudgetsExceedCard"]
          and "gpucap_gpu_memory_bytes" in alerts["GpucapBudgetsExceedCard"], "no alert on budgets past the card")
    # Burstable memory (issue 35): reclaims and requests past a card alerted.
    check("GpucapReclaims" in alerts and "gpucap_container_reclaims_total" in alerts["GpucapReclaims"],
          "no alert on reclaims")
    check("GpucapCardRequestsOvercommitted" in alerts and "gpucap_card_overcommitted" in
          alerts["GpucapCardRequestsOvercommitted"], "no alert on requests past a card")
    exprs = list(alerts.values())

    # The dashboard.
    with open(os.path.join(examples, "grafana-dashboard.json")) as f:
        dash = json.load(f)
    check(isinstance(dash.get("schemaVersion"), int) and dash.get("uid") and dash.get("title"), "dashboard header")
    panels = dash["panels"]
    ids = [p["id"] for p in panels]
    check(len(ids) == len(set(ids)), "panel ids repeat")
    for p in panels:
        check(p.get("type") and p.get("title") and p.get("targets") and
              all(k in p.get("gridPos", {}) for k in "xywh"), f"panel {p.get('title')}: incomplete")
    by_title = {p["title"]: [t["expr"] for t in p["targets"]] for p in panels}
    exprs += [e for es in by_title.values() for e in es]
    usage = [es for es in by_title.values()
             if any("gpucap_container_used_bytes" in e for e in es) and any("gpucap_container_budget_bytes" in e for e in es)]
    check(usage, "no panel shows usage against budget")
    check(any(any(re.search(r"rate\(gpucap_container_denials_total", e) for e in es) for es in by_title.values()),
          "no panel shows the rate of denials")
    check(any(any("gpucap_gpu_budgets_bytes" in e for e in es) and any("gpucap_gpu_memory_bytes" in e for e in es)
              for es in by_title.values()), "no panel shows budgets against the card")
    check(any(any("gpucap_container_request_bytes" in e for e in es) and any("gpucap_container_loaned_bytes" in e for e in es)
              for es in by_title.values()), "no panel shows burstable containers' requests and loans")
    check(any(any("gpucap_card_lendable_bytes" in e for e in es) and any("gpucap_card_loaned_bytes" in e for e in es)
              for es in by_title.values()), "no panel shows what each card lends")
    for v in dash["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict):
            exprs.append(q["query"])

    # Every metric queried is one the exporter serves.
    for e in exprs:
        for name in re.findall(r"\bgpucap_[a-z_]+", e):
            check(name in families, f"{name} (in {e!r}) is not served by the exporter")
finally:
    shutil.rmtree(tmp)
sys.exit(verdict("ok: the exporter's manifests, rules and dashboard fit together"))
