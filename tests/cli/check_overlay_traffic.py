#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_overlay_traffic.py EXAMPLES_DIR [README]: every overlay works as shipped on a CNI that enforces
NetworkPolicy, its cluster-specific values are set in one place, and the README's quick start builds
the images it needs.

For each directory of EXAMPLES_DIR/overlays, rendered with `kubectl kustomize`:
- traffic: the NetworkPolicies are evaluated as an enforcing CNI does (a pod selected by a policy of
  a direction is isolated in it; a connection passes when some rule of a selecting policy admits its
  port and peer). What the rendered webhook is configured with decides what it needs: the API server
  must reach its port (always); with GPUCAP_WEBHOOK_NAMESPACE_ANNOTATIONS=true it must reach the API
  server (the address of API_SERVER_CIDR in settings.env, port 6443 or 443), hold an API token and
  `get` on namespaces; with GPUCAP_WEBHOOK_KUBE_API naming a host, DNS (each setting read from the
  container's args as well as its environment). A gpucap-agent container (live budgets) must reach
  the API server too, with a token. A PodMonitor that selects the
  webhook or the exporter needs Prometheus (PROMETHEUS_NAMESPACE) to reach its port. An ordinary
  pod must not reach the webhook, and gpucap-node must deny by default.
- one place: settings.env rewritten with other values renders with each of them everywhere it
  belongs (images and GPUCAP_WEBHOOK_IMAGE, pod CIDRs, priority class, Prometheus namespace and
  release label, the cluster maximum, the default budget where the overlay has the default-budget
  component, the DaemonSets' RuntimeClass, absent when left empty, the alerts' runbook URL) and none
  of the shipped ones
  left; namespace-policy.ini beside it is the namespace policy the webhook mounts, shipped with
  commented examples only; no patch addresses an env entry by index.
- quick start: every image the overlay runs (REGISTRY/NAME:VERSION) is built by a `docker build
  --target T -t REGISTRY/NAME:VERSION` line of the README's cluster quick start, and the target exists
  in the Dockerfile.
Exit 0 pass, 1 fail, 77 without kubectl or python3-yaml.
"""
import ipaddress
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("python3-yaml missing; skipping")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, render, verdict  # noqa: E402


def read_env(path):
    env = {}
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k] = v
    return env


# ---- NetworkPolicy semantics ----

def selects(selector, labels):
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        have = e["key"] in labels
        val = labels.get(e["key"])
        op = e["operator"]
        if op == "In" and val not in e.get("values", []):
            return False
        if op == "NotIn" and have and val in e.get("values", []):
            return False
        if op == "Exists" and not have:
            return False
        if op == "DoesNotExist" and have:
            return False
    return True


def types(p):
    t = p["spec"].get("policyTypes")
    if t:
        return t
    return ["Ingress"] + (["Egress"] if "egress" in p["spec"] else [])


def port_ok(ports, port, names):
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != port[1]:
            continue
        want = p.get("port")
        if want is None or want == port[0] or (isinstance(want, str) and names.get(want) == port[0]):
            return True
    return False


def peer_ok(peers, policy_ns, other):
    """other: {'ip': addr} or {'ns': name, 'labels': {...}}"""
    if not peers:
        return True
    for peer in peers:
        if "ipBlock" in peer:
            if "ip" not in other:
                continue  # pods' addresses are not asked here
            ip = ipaddress.ip_address(other["ip"])
            net = ipaddress.ip_network(peer["ipBlock"]["cidr"], strict=False)
            if ip.version == net.version and ip in net and not any(
                    ip.version == ipaddress.ip_network(e, strict=False).version and
                    ip in ipaddress.ip_network(e, strict=False) for e in peer["ipBlock"].get("except", [])):
                return True
            continue
        if "ns" not in other:
            continue
        ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
        ns_labels = {"kubernetes.io/metadata.name": other["ns"]}
        if ns_sel is not None:
            if not selects(ns_sel, ns_labels):
                continue
        elif other["ns"] != policy_ns:
            continue
        if pod_sel is not None and not selects(pod_sel, other.get("labels", {})):
            continue
        return True
    return False


def allowed(policies, direction, ns, labels, port, other, names=None):
    """Is a connection of pod (ns, labels) in `direction` on `port` (number, protocol) with `other` allowed?"""
    key = "ingress" if direction == "Ingress" else "egress"
    peers_key = "from" if direction == "Ingress" else "to"
    selecting = [p for p in policies if p["metadata"].get("namespace") == ns and direction in types(p)
                 and selects(p["spec"].get("podSelector", {}), labels)]
    if not selecting:
        return True
    for p in selecting:
        for rule in p["spec"].get(key) or []:
            if port_ok(rule.get("ports"), port, names or {}) and peer_ok(rule.get(peers_key), ns, other):
                return True
    return False


def first_host(cidr):
    net = ipaddress.ip_network(cidr, strict=False)
    return str(next(net.hosts())) if net.num_addresses > 1 else str(net.network_address)


def setting(ctr, flag, var):
    """A program's setting as the container configures it: its --flag in args (either spelling,
    the last one wins, as getopt_long reads them), else its variable, else None."""
    val = None
    args = [str(a) for a in (ctr.get("command") or [])[1:] + (ctr.get("args") or [])]
    for i, a in enumerate(args):
        if a == "--" + flag and i + 1 < len(args):
            val = args[i + 1]
        elif a.startswith("--" + flag + "="):
            val = a.split("=", 1)[1]
    if val is None:
        val = {e["name"]: e.get("value") for e in ctr.get("env", [])}.get(var)
    return val


def check_api_egress(name, docs, pols, settings, ns, labels, who, url):
    """A program that reads the API server (the address of API_SERVER_CIDR, port 6443 or 443; DNS
    too where its URL names a host) must be let out to it."""
    api = first_host(settings.get("API_SERVER_CIDR", "10.96.0.1/32"))
    ok = any(allowed(pols, "Egress", ns, labels, (p, "TCP"), {"ip": api}) for p in (6443, 443))
    check(ok, f"{name}: {who} reads the API server, but no policy lets it reach it ({api}:6443 or :443)")
    host = re.sub(r"^https?://", "", url or "").split("/")[0].rsplit(":", 1)[0].strip("[]")
    if host and not host.startswith("$"):
        try:
            ipaddress.ip_address(host)
        except ValueError:
            dns = {"ns": "kube-system", "labels": {"k8s-app": "kube-dns"}, "ip": "10.96.0.10"}
            check(allowed(pols, "Egress", ns, labels, (53, "UDP"), dns),
                  f"{name}: {who} names the API server by a host name ({host}) but DNS is not allowed")


def check_agent(name, docs, pols, settings):
    """gpucap-agent (live budgets): lists and watches pods on the API server, with a token."""
    for d in docs:
        if d["kind"] not in ("Deployment", "DaemonSet"):
            continue
        pod = d["spec"]["template"]
        for c in pod["spec"]["containers"]:
            if not any(str(x).endswith("gpucap-agent") for x in (c.get("command") or [])[:1]):
                continue
            who = f"gpucap-agent ({d['metadata']['name']}/{c['name']})"
            check_api_egress(name, docs, pols, settings, d["metadata"]["namespace"], pod["metadata"]["labels"], who,
                             setting(c, "kube-api", "GPUCAP_AGENT_KUBE_API"))
            vols = {v["name"]: v for v in pod["spec"].get("volumes", [])}
            token = pod["spec"].get("automountServiceAccountToken") is not False or any(
                "projected" in vols.get(m["name"], {}) and "/serviceaccount" in m["mountPath"]
                for m in c.get("volumeMounts", []))
            check(token, f"{name}: {who} has no API token")


def check_traffic(name, docs, settings):
    pols = [d for d in docs if d["kind"] == "NetworkPolicy"]
    deps = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "gpucap-webhook"]
    check(len(deps) == 1, f"{name}: the webhook Deployment")
    if not deps:
        return
    dep = deps[0]
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    ctr = pod["spec"]["containers"][0]
    names = {p["name"]: p["containerPort"] for p in ctr.get("ports", [])}
    port = names.get("https", 8443)
    pod_cidr = settings.get("POD_CIDR", "10.244.0.0/16")
    apiserver_src = "10.0.0.10"  # a control-plane node, outside the pod network
    check(allowed(pols, "Ingress", "gpucap-system", labels, (port, "TCP"), {"ip": apiserver_src}, names),
          f"{name}: the API server cannot reach the webhook's port {port}")
    stranger = {"ns": "team-a", "labels": {"app": "x"}, "ip": first_host(pod_cidr)}
    check(not allowed(pols, "Ingress", "gpucap-system", labels, (port, "TCP"), stranger, names),
          f"{name}: an ordinary pod can reach the webhook")
    if (setting(ctr, "namespace-annotations", "GPUCAP_WEBHOOK_NAMESPACE_ANNOTATIONS") or "").lower() in ("true", "1"):
        check_api_egress(name, docs, pols, settings, "gpucap-system", labels,
                         "the webhook with namespace annotations (every GPU pod of an uncached namespace would be "
                         "refused on an enforcing CNI)", setting(ctr, "kube-api", "GPUCAP_WEBHOOK_KUBE_API"))
        check(pod["spec"].get("automountServiceAccountToken") is True,
              f"{name}: namespace annotations without an API token")
        sa = pod["spec"].get("serviceAccountName")
        roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
        bound = [b for b in docs if b["kind"] == "ClusterRoleBinding" and
                 any(s.get("name") == sa and s.get("namespace") == "gpucap-system" for s in b.get("subjects", []))]
        can = any(r.get("resources") and "namespaces" in r["resources"] and "get" in r.get("verbs", [])
                  for b in bound for r in roles.get(b["roleRef"]["name"], {}).get("rules", []))
        check(can, f"{name}: namespace annotations without `get` on namespaces for {sa}")
    prom = {"ns": settings.get("PROMETHEUS_NAMESPACE", "monitoring"),
            "labels": {"app.kubernetes.io/name": "prometheus"}}
    for pm in (d for d in docs if d["kind"] == "PodMonitor"):
        check("release" in pm["metadata"].get("labels", {}),
              f"{name}: PodMonitor {pm['metadata']['name']} has no release label (kube-prometheus-stack ignores it)")
        targets = [d for d in docs if d["kind"] in ("Deployment", "DaemonSet") and
                   d["metadata"].get("namespace") == pm["metadata"]["namespace"] and
                   selects(pm["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])]
        check(targets, f"{name}: PodMonitor {pm['metadata']['name']} selects no workload")
        for t in targets:
            c = t["spec"]["template"]["spec"]["containers"][0]
            tnames = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            for ep in pm["spec"]["podMetricsEndpoints"]:
                p = tnames.get(ep["port"])
                check(p is not None, f"{name}: PodMonitor port {ep['port']} is not a port of {t['metadata']['name']}")
                check(p is None or allowed(pols, "Ingress", t["metadata"]["namespace"],
                                           t["spec"]["template"]["metadata"]["labels"], (p, "TCP"), prom, tnames),
                      f"{name}: Prometheus ({prom['ns']}) cannot scrape {t['metadata']['name']}:{p}")
    for pr in (d for d in docs if d["kind"] == "PrometheusRule"):
        check("release" in pr["metadata"].get("labels", {}), f"{name}: PrometheusRule without a release label")
    check_agent(name, docs, pols, settings)
    for ns in ("gpucap-system", "gpucap-node"):
        deny = [p for p in pols if p["metadata"].get("namespace") == ns and p["spec"].get("podSelector") == {}
                and set(types(p)) == {"Ingress", "Egress"} and not p["spec"].get("ingress") and not p["spec"].get("egress")]
        check(deny, f"{name}: no default-deny NetworkPolicy in {ns}")


# ---- one place ----

OTHER = {"REGISTRY": "reg.test:5000/team/gpu", "VERSION": "9.8.7", "POD_CIDR": "10.99.0.0/16",
         "POD_CIDR_V6": "fd00:99::/56", "PRIORITY_CLASS": "system-cluster-critical",
         "PROMETHEUS_NAMESPACE": "observability-x", "PROMETHEUS_RELEASE": "kps-test",
         "API_SERVER_CIDR": "10.0.0.5/32", "MAX_MEMORY": "7GiB", "RUNTIME_CLASS": "nvidia",
         "RUNBOOK_URL": "https://docs.test/team/runbooks.md"}
# Only where the overlay has the default-budget component (its settings.env then has it).
OTHER_DEFAULT = "3GiB"
# A namespace policy in force, written where the overlay's namespace-policy.ini is.
OTHER_POLICY = "[team-x]\nmax_memory = 6GiB\ndefault_memory = 2GiB\n"


def images_of(docs):
    out = []
    for d in docs:
        if d["kind"] in ("Deployment", "DaemonSet"):
            for c in d["spec"]["template"]["spec"]["containers"]:
                out.append(c["image"])
                out += [e["value"] for e in c.get("env", []) if e["name"] == "GPUCAP_WEBHOOK_IMAGE"]
    return out


def render_with(examples, name, settings, policy=None):
    """The overlay rendered from a copy of EXAMPLES_DIR whose settings.env holds `settings` (and
    whose namespace-policy.ini holds `policy`, when given)."""
    tmp = tempfile.mkdtemp()
    try:
        shutil.copytree(examples, os.path.join(tmp, "examples"))
        here = os.path.join(tmp, "examples", "overlays", name)
        with open(os.path.join(here, "settings.env"), "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in settings.items())
        if policy is not None:
            with open(os.path.join(here, "namespace-policy.ini"), "w") as f:
                f.write(policy)
        return render(here)
    finally:
        shutil.rmtree(tmp)


def webhook_of(docs):
    deps = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "gpucap-webhook"]
    return deps[0] if deps else None


def webhook_env(docs):
    dep = webhook_of(docs)
    ctr = dep["spec"]["template"]["spec"]["containers"][0] if dep else {}
    return {e["name"]: e.get("value") for e in ctr.get("env", [])}


def check_knobs(examples, name, shipped, docs):
    """The values of settings.env beyond the images and the network (issue 34), and the namespace
    policy beside it: each applied where it belongs when set, absent when not."""
    env = webhook_env(docs)
    check(env.get("GPUCAP_WEBHOOK_MAX_MEMORY") == OTHER["MAX_MEMORY"],
          f"{name}: MAX_MEMORY not applied: GPUCAP_WEBHOOK_MAX_MEMORY={env.get('GPUCAP_WEBHOOK_MAX_MEMORY')}")
    if "DEFAULT_MEMORY" in shipped:
        check(env.get("GPUCAP_WEBHOOK_DEFAULT_MEMORY") == OTHER_DEFAULT,
              f"{name}: DEFAULT_MEMORY not applied: {env.get('GPUCAP_WEBHOOK_DEFAULT_MEMORY')}")
    else:
        check("GPUCAP_WEBHOOK_DEFAULT_MEMORY" not in env, f"{name}: a default budget without DEFAULT_MEMORY")
    daemonsets = [d for d in docs if d["kind"] == "DaemonSet"]
    for ds in daemonsets:
        got = ds["spec"]["template"]["spec"].get("runtimeClassName")
        check(got == OTHER["RUNTIME_CLASS"], f"{name}: RUNTIME_CLASS not applied to {ds['metadata']['name']}: {got}")
    check(not any(d["kind"] == "Deployment" and d["spec"]["template"]["spec"].get("runtimeClassName") for d in docs),
          f"{name}: a RuntimeClass on the webhook, which needs no GPU")
    for rule in [d for d in docs if d["kind"] == "PrometheusRule"]:
        for g in rule["spec"]["groups"]:
            for r in g["rules"]:
                if "alert" in r:
                    url = r.get("annotations", {}).get("runbook_url", "")
                    check(url == f"{OTHER['RUNBOOK_URL']}#{r['alert'].lower()}",
                          f"{name}: RUNBOOK_URL not applied to {r['alert']}: {url}")
    pols = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpucap-namespace-policy"]
    check(len(pols) == 1 and pols[0]["metadata"]["namespace"] == "gpucap-system" and
          pols[0]["data"].get("policy.ini") == OTHER_POLICY,
          f"{name}: namespace-policy.ini not the ConfigMap's policy.ini: {[p.get('data') for p in pols]}")
    # Left empty: no RuntimeClass (null, which the API server takes as none); shipped: the file's policy.
    empty = dict(OTHER, RUNTIME_CLASS="")
    if "DEFAULT_MEMORY" in shipped:
        empty["DEFAULT_MEMORY"] = OTHER_DEFAULT
    docs = render_with(examples, name, empty)
    for ds in [d for d in docs if d["kind"] == "DaemonSet"]:
        check(ds["spec"]["template"]["spec"].get("runtimeClassName") is None,
              f"{name}: RUNTIME_CLASS empty, yet {ds['metadata']['name']} has runtimeClassName "
              f"{ds['spec']['template']['spec'].get('runtimeClassName')!r}")
    pols = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpucap-namespace-policy"]
    shipped_policy = open(os.path.join(examples, "overlays", name, "namespace-policy.ini")).read()
    check(len(pols) == 1 and pols[0]["data"].get("policy.ini") == shipped_policy,
          f"{name}: the shipped namespace-policy.ini is not the ConfigMap's")
    live = [line.strip() for line in shipped_policy.splitlines() if line.strip() and line.strip()[0] not in ";#"]
    check(not live, f"{name}: namespace-policy.ini is shipped with live entries (examples stay commented): {live}")


def check_one_place(examples, name, shipped):
    kust = open(os.path.join(examples, "overlays", name, "kustomization.yaml")).read()
    check(not re.search(r"/env/\d+", kust), f"{name}: a patch addresses an env entry by its index")
    check(os.path.exists(os.path.join(examples, "overlays", name, "settings.env")), f"{name}: no settings.env")
    check(os.path.exists(os.path.join(examples, "overlays", name, "namespace-policy.ini")),
          f"{name}: no namespace-policy.ini beside settings.env")
    other = dict(OTHER)
    if "DEFAULT_MEMORY" in shipped:
        other["DEFAULT_MEMORY"] = OTHER_DEFAULT
    docs = render_with(examples, name, other, OTHER_POLICY)
    check_knobs(examples, name, shipped, docs)
    text = yaml.safe_dump_all(docs)
    # The PriorityClass gpucap-critical is shipped whatever is chosen; the webhook configuration
    # names the namespace `monitoring` among those it never covers.
    placed = set()

    def scalars(node):
        if isinstance(node, dict):
            for v in node.values():
                scalars(v)
        elif isinstance(node, list):
            for v in node:
                scalars(v)
        elif isinstance(node, str):
            placed.add(node)
            placed.update(re.split(r"[/:]", node))

    for d in docs:
        if d["kind"] not in ("PriorityClass", "MutatingWebhookConfiguration"):
            scalars(d)
    for k, v in shipped.items():
        if k in OTHER and v and v != OTHER[k] and k != "API_SERVER_CIDR":
            check(v not in placed, f"{name}: {k}={v} of the shipped settings.env is left after changing it")
    for img in images_of(docs):
        check(img.startswith(OTHER["REGISTRY"] + "/") and img.endswith(":" + OTHER["VERSION"]),
              f"{name}: image {img} does not follow REGISTRY and VERSION")
    dep = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "gpucap-webhook"][0]
    check(dep["spec"]["template"]["spec"].get("priorityClassName") == OTHER["PRIORITY_CLASS"],
          f"{name}: PRIORITY_CLASS not applied")
    check(OTHER["POD_CIDR"] in text and OTHER["POD_CIDR_V6"] in text, f"{name}: POD_CIDR not applied")
    for d in docs:
        if d["kind"] in ("PodMonitor", "PrometheusRule"):
            check(d["metadata"]["labels"].get("release") == OTHER["PROMETHEUS_RELEASE"],
                  f"{name}: PROMETHEUS_RELEASE not on {d['kind']} {d['metadata']['name']}")
    if any(d["kind"] == "PodMonitor" for d in docs):
        check(OTHER["PROMETHEUS_NAMESPACE"] in text, f"{name}: PROMETHEUS_NAMESPACE not applied")
    check("gpucap-cluster-settings" not in text, f"{name}: the settings ConfigMap would be applied")
    settings = dict(OTHER)
    check_traffic(f"{name} (other settings)", docs, settings)


# ---- the quick start ----

def check_quick_start(readme, dockerfile, name, docs, settings):
    text = open(readme).read()
    m = re.search(r"## On a cluster.*?```sh\n(.*?)```", text, re.S)
    check(m, "README: no cluster quick start block")
    if not m:
        return
    block = m.group(1)
    targets = set(re.findall(r"^FROM \S+ AS (\S+)", open(dockerfile).read(), re.M))
    built = {}
    lines = re.findall(r"(?:docker|podman) build [^\n]*--target (\S+) [^\n]*-t (\S+)", block)
    if "build-images.sh" in block:
        # The script builds the images: what it would run, with the settings as placeholders.
        script = os.path.join(os.path.dirname(dockerfile), "build-images.sh")
        out = subprocess.run(["sh", script, "--dry-run", "--tool", "podman", "--registry", "REGISTRY",
                              "--version", "VERSION"], capture_output=True, text=True)
        check(out.returncode == 0, f"build-images.sh --dry-run: {out.stderr}")
        lines += re.findall(r"^\+ podman build [^\n]*--target (\S+) [^\n]*-t (\S+)", out.stdout, re.M)
    for t, tag in lines:
        built[tag] = t
        check(t in targets, f"README quick start builds target {t}, which the Dockerfile lacks")
    reg, ver = settings.get("REGISTRY", ""), settings.get("VERSION", "")
    for img in images_of(docs):
        want = img.replace(reg, "REGISTRY", 1).replace(":" + ver, ":VERSION")
        alt = img.replace(reg, "$REGISTRY", 1).replace(":" + ver, ":$VERSION")
        check(want in built or alt in built or any(tag.replace("${", "$").replace("}", "") in (want, alt)
                                                   for tag in built),
              f"{name}: the overlay runs {img}, which the README's quick start does not build ({sorted(built)})")


def main():
    if not shutil.which("kubectl"):
        print("kubectl is not installed; skipping")
        return 77
    examples = os.path.abspath(sys.argv[1])
    readme = sys.argv[2] if len(sys.argv) > 2 else None
    overlays = sorted(os.listdir(os.path.join(examples, "overlays")))
    for name in overlays:
        path = os.path.join(examples, "overlays", name)
        settings = read_env(os.path.join(path, "settings.env"))
        docs = render(path)
        if not docs:
            continue
        check_traffic(name, docs, settings)
        check_one_place(examples, name, settings)
        if readme:
            check_quick_start(readme, os.path.join(examples, "kubernetes", "Dockerfile"), name, docs, settings)
    return verdict(f"ok: {len(overlays)} overlays ({', '.join(overlays)}): traffic, one place, quick start")


if __name__ == "__main__":
    sys.exit(main())
