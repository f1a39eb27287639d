#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""check_patch.py: the webhook's patches applied with a real JSON Patch implementation.

usage: check_patch.py ADMISSION_CLI FIXTURE_DIR [--escape NAME | --escapes]

For each fixture the handler's base64 JSONPatch is decoded and applied to the request's pod with
Debian's python3-jsonpatch (RFC 6902, strict about paths), then the resulting pod is checked field
by field against TEAM contract 2: chosen containers carry the read-only mounts of the library
directory, /etc/ld.so.preload and their own locked ini, their own ledger directory and the identity
variables (or, in LD_PRELOAD mode, the library appended to LD_PRELOAD with user libraries kept
first); the init container `gpucap inject` comes first with the budgets as arguments and meets the
restricted Pod Security level (pss_restricted.py); the webhook adds no restricted violation to the
pod; every other container and field is unchanged; the mutated pods validate against the last
three Kubernetes schemas (kubernetes-validate, when installed). The mutated pod is then sent
through the handler again (what reinvocation does) and must come back with no patch.

--escape NAME runs one tenant escape attempt (see ESCAPES): each must be denied with a message
naming what the tenant did (or, in a trusted namespace, allowed). Exit 0 pass, 1 fail, 77 without
jsonpatch.
"""
import base64
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pss_restricted  # noqa: E402
from checks import check, verdict  # noqa: E402

try:
    import jsonpatch
except ImportError:
    print("python3-jsonpatch is not installed; skipping")
    sys.exit(77)

PREFIX = "/usr/local/gpucap"
LIB = PREFIX + "/lib/libgpucap.so"
IMAGE = "ghcr.io/example/gpucap:0.1.0"
IDENTITY = {"GPUCAP_POD_NAMESPACE": "metadata.namespace", "GPUCAP_POD_NAME": "metadata.name",
            "GPUCAP_POD_UID": "metadata.uid"}

# fixture: (webhook arguments, {chosen container: budget}, --max passed to the init container)
CASES = {
    "annotated-bare": ([], {"train": "8GiB"}, None),
    "annotated-env-volumes": ([], {"train": "12.5%"}, None),
    "existing-ld-preload": ([], {"app": "4GiB"}, None),
    "existing-ld-preload (env)": (["--preload", "env"], {"app": "4GiB"}, None),
    "ld-preload-valuefrom (env)": (["--preload", "env"], {"app": "4GiB"}, None),
    "init-containers": ([], {"warmup": "2GiB", "serve": "2GiB"}, None),
    "several-containers (trusted)": (["--trusted-namespaces", "ml"], {"a": "6GiB", "b": "6GiB"}, None),
    # Without a maximum the default is the maximum (issue 23): the init container passes it on.
    "default-budget": (["--default-memory", "25%"], {"train": "25%"}, "25%"),
    "default-budget (max)": (["--default-memory", "4GiB", "--max-memory", "10GiB"], {"train": "4GiB"}, "10GiB"),
    "default-budget (max only)": (["--max-memory", "30%"], {"train": "30%"}, "30%"),
    # A percentage cannot be compared with a byte maximum at admission: the library bounds it.
    "annotated-env-volumes (mixed units)": (["--max-memory", "10GiB"], {"train": "12.5%"}, "10GiB"),
    "restricted-pod": ([], {"cuda": "2GiB"}, None),
    "no-gpu": (["--default-memory", "25%"], {}, None),
    "gpu-zero": ([], {}, None),
    "opt-out": (["--default-memory", "25%", "--pod-opt-out", "true"], {}, None),
    "update": (["--default-memory", "25%"], {}, None),
    # Schedulers' requests (requests.c): KAI's annotations give the first container (or the init or
    # regular one named by gpu-fraction-container-name) its share; the pod's other containers fall
    # back to gpucap's annotation or the default. HAMi's resources are per container.
    "kai-fraction": ([], {"trainer": "50%"}, None),
    "kai-fraction (default)": (["--default-memory", "25%", "--max-memory", "60%"],
                               {"trainer": "50%", "log-shipper": "25%"}, "60%"),
    # A share cannot be compared with a byte maximum at admission: the library bounds it on the node.
    "kai-fraction (byte max)": (["--max-memory", "10GiB"], {"trainer": "50%", "log-shipper": "10GiB"}, "10GiB"),
    "kai-mib": ([], {"trainer": "2000MiB"}, None),
    "kai-init-container": ([], {"warmup": "25%"}, None),
    "kai-init-container (default)": (["--default-memory", "10%", "--max-memory", "30%"],
                                     {"warmup": "25%", "serve": "10%"}, "30%"),
    "kai-num-devices": ([], {"trainer": "50%"}, None),
    "hami-gpumem": ([], {"infer": "3000MiB"}, None),
    "hami-gpumem-percentage": (["--default-memory", "10%", "--max-memory", "50%"], {"infer": "50%"}, "50%"),
    "hami-gpucores": ([], {"infer": "1024MiB"}, None),
    "sched-several-containers": ([], {"a": "3000MiB", "b": "40%", "c": "6GiB"}, None),
    "sched-mixed": ([], {"trainer": "2000MiB", "helper": "6GiB"}, None),
    "sched-mixed (max)": (["--max-memory", "8GiB", "--default-memory", "1GiB"], {"trainer": "2000MiB", "helper": "6GiB"},
                          "8GiB"),
}
# The response's warnings (admission/v1 response.warnings), by fixture: fragments, one per warning.
WARNINGS = {
    "hami-gpucores": ["container infer: nvidia.com/gpucores (30) is not enforced"],
    "sched-several-containers": ["container b: nvidia.com/gpucores (50) is not enforced"],
    # A maximum of the other kind lowers the budget on some cards (issue 34): said, with which.
    "annotated-env-volumes (mixed units)": ["container train: 12.5% (annotation gpucap.io/memory) is above the "
                                            "maximum 10GiB (cluster --max-memory) on cards over 80.00 GiB: there its "
                                            "budget is 10GiB"],
    "kai-fraction (byte max)": ["container trainer: 50% (KAI annotation gpu-fraction) is above the maximum 10GiB "
                                "(cluster --max-memory) on cards over 20.00 GiB"],
}
# Scheduler fixtures are restricted pods, and stay so once mutated.
RESTRICTED = ("restricted", "kai-", "hami-", "sched-")

mutated_pods = []
decided = []  # [label, pod, changed or denied] of every review sent, for the matchConditions check



def run(cli, args, review):
    out = subprocess.run([cli] + args, input=json.dumps(review).encode(), capture_output=True, check=True)
    status, _, body = out.stdout.decode().partition("\n")
    body = json.loads(body) if body else None
    resp = (body or {}).get("response") or {}
    decided.append([f"{len(decided)}:{' '.join(args)}", review["request"]["object"],
                    "patch" in resp or resp.get("allowed") is False])
    return int(status), body


def env_of(c):
    return {e["name"]: e for e in c.get("env") or [] if "name" in e}


def wanted_mounts(name, env_mode):
    m = [{"name": "gpucap-lib", "mountPath": PREFIX, "readOnly": True}]
    if not env_mode:
        m.append({"name": "gpucap-lib", "mountPath": "/etc/ld.so.preload", "subPath": "ld.so.preload",
                  "readOnly": True})
    m.append({"name": "gpucap-lib", "mountPath": "/etc/gpucap/gpucap.ini", "subPath": f"{name}/gpucap.ini",
              "readOnly": True})
    m.append({"name": "gpucap-ledger", "mountPath": "/run/gpucap/ledger/gpucap.ledger",
              "subPath": name + "/gpucap.ledger"})
    return m


def check_container(fx, before, after, env_mode, trusted):
    name = before["name"]
    env = env_of(after)
    for var, field in IDENTITY.items():
        check(env.get(var) == {"name": var, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": field}}},
              f"{fx}/{name}: {var} from the downward API {field}")
    check(env.get("GPUCAP_CONTAINER_NAME") == {"name": "GPUCAP_CONTAINER_NAME", "value": name},
          f"{fx}/{name}: GPUCAP_CONTAINER_NAME literal")
    old = env_of(before).get("LD_PRELOAD")
    preload = env.get("LD_PRELOAD", {}).get("value", "")
    if env_mode:
        check(preload.replace(" ", ":").split(":").count(LIB) == 1, f"{fx}/{name}: LD_PRELOAD {preload!r} names {LIB}")
        if old and old.get("value"):
            check(preload.startswith(old["value"] + ":"), f"{fx}/{name}: user LD_PRELOAD kept first: {preload!r}")
        if old and "valueFrom" in old:
            check(env.get("LD_PRELOAD_BEFORE_GPUCAP", {}).get("valueFrom") == old["valueFrom"],
                  f"{fx}/{name}: LD_PRELOAD from a reference moved to LD_PRELOAD_BEFORE_GPUCAP")
            names = [e["name"] for e in after["env"]]
            check(names.index("LD_PRELOAD_BEFORE_GPUCAP") + 1 == names.index("LD_PRELOAD"),
                  f"{fx}/{name}: LD_PRELOAD_BEFORE_GPUCAP defined just before LD_PRELOAD")
            check(preload == "$(LD_PRELOAD_BEFORE_GPUCAP):" + LIB, f"{fx}/{name}: LD_PRELOAD expands the user's")
    else:
        check(env.get("LD_PRELOAD") == old, f"{fx}/{name}: LD_PRELOAD untouched in file mode")
    # Every variable the user had is still there, same value, same order; nothing else was added.
    ours = set(IDENTITY) | {"GPUCAP_CONTAINER_NAME", "LD_PRELOAD_BEFORE_GPUCAP"} | ({"LD_PRELOAD"} if env_mode else set())
    user_names = {e.get("name") for e in before.get("env") or []}
    kept = [e for e in after.get("env") or [] if e["name"] not in ours or (trusted and e["name"] in user_names
                                                                          and e["name"] != "LD_PRELOAD")]
    user = [e for e in before.get("env") or [] if not (env_mode and e.get("name") == "LD_PRELOAD")]
    check(kept == user, f"{fx}/{name}: user env unchanged: {kept} != {user}")
    want = wanted_mounts(name, env_mode)
    got = [m for m in after.get("volumeMounts") or [] if m.get("name") in ("gpucap-lib", "gpucap-ledger")]
    check(got == want, f"{fx}/{name}: the mounts of contract 2: {got}")
    check([m for m in after.get("volumeMounts") or [] if m not in want] == (before.get("volumeMounts") or []),
          f"{fx}/{name}: user mounts unchanged")
    rest_a = {k: v for k, v in after.items() if k not in ("env", "volumeMounts")}
    rest_b = {k: v for k, v in before.items() if k not in ("env", "volumeMounts")}
    check(rest_a == rest_b, f"{fx}/{name}: nothing else in the container changed")


def check_init(fx, init, budgets, maximum):
    cmd = ["/usr/local/gpucap/bin/gpucap", "inject", "--to", "/gpucap-out/lib", "--ledgers", "/gpucap-out/ledger"]
    if maximum:
        cmd += ["--max", maximum]
    cmd += [f"{n}={b}" for n, b in budgets.items()]
    check(init.get("name") == "gpucap-init" and init.get("image") == IMAGE, f"{fx}: init container gpucap-init")
    check(init.get("command") == cmd, f"{fx}: init command {init.get('command')} != {cmd}")
    check(pss_restricted.violations({"spec": {"containers": [init]}}) == [],
          f"{fx}: init container restricted: {pss_restricted.violations({'spec': {'containers': [init]}})}")
    res = init.get("resources") or {}
    check(set(res.get("requests", {})) == {"cpu", "memory"} and set(res.get("limits", {})) == {"cpu", "memory"},
          f"{fx}: init container requests and limits cpu and memory")
    check(init.get("securityContext", {}).get("readOnlyRootFilesystem") is True, f"{fx}: init read-only root")
    check(init.get("volumeMounts") == [{"name": "gpucap-lib", "mountPath": "/gpucap-out/lib"},
                                       {"name": "gpucap-ledger", "mountPath": "/gpucap-out/ledger"}],
          f"{fx}: init container mounts both volumes writable")


def load(fixtures, fx):
    with open(os.path.join(fixtures, fx.split(" ")[0] + ".json")) as f:
        return json.load(f)


def check_fixture(cli, review, fx, args, budgets, maximum):
    args = args + ["--image", IMAGE]
    env_mode = "env" in args[args.index("--preload") + 1:args.index("--preload") + 2] if "--preload" in args else False
    trusted = "--trusted-namespaces" in args
    status, out = run(cli, args, review)
    resp = out["response"]
    check(status == 200 and resp["allowed"] is True, f"{fx}: allowed: {resp.get('status')}")
    check(resp["uid"] == review["request"]["uid"], f"{fx}: uid echoed")
    check_warnings(fx, resp)
    pod = review["request"]["object"]
    if not budgets:
        check("patch" not in resp, f"{fx}: no patch")
        return
    check(resp.get("patchType") == "JSONPatch", f"{fx}: patchType JSONPatch")
    ops = json.loads(base64.b64decode(resp["patch"], validate=True))
    mutated = jsonpatch.apply_patch(pod, ops)  # raises on any path that does not exist
    mutated_pods.append((fx, mutated))

    check(pod == review["request"]["object"], f"{fx}: input untouched")
    spec_b, spec_a = pod["spec"], mutated["spec"]
    inits = spec_a.get("initContainers") or []
    check(inits and inits[0].get("name") == "gpucap-init", f"{fx}: gpucap-init is the first init container")
    if inits:
        check_init(fx, inits[0], budgets, maximum)
    pairs = list(zip(spec_b.get("initContainers") or [], inits[1:])) + \
        list(zip(spec_b.get("containers") or [], spec_a.get("containers") or []))
    check(len(inits) == len(spec_b.get("initContainers") or []) + 1, f"{fx}: one init container added")
    check(len(spec_a["containers"]) == len(spec_b["containers"]), f"{fx}: no container added")
    for before, after in pairs:
        if before["name"] in budgets:
            check_container(fx, before, after, env_mode, trusted)
        else:
            check(before == after, f"{fx}: {before['name']} (no GPU) left alone")

    vols = [v for v in spec_a.get("volumes") or [] if v["name"] in ("gpucap-lib", "gpucap-ledger")]
    check(vols == [{"name": "gpucap-lib", "emptyDir": {}}, {"name": "gpucap-ledger", "emptyDir": {}}],
          f"{fx}: the two emptyDir volumes, no hostPath")
    check([v for v in spec_a.get("volumes") or [] if v not in vols] == (spec_b.get("volumes") or []),
          f"{fx}: other volumes unchanged")
    check(mutated["metadata"]["annotations"].get("gpucap.io/injected") == ",".join(budgets), f"{fx}: injected annotation")
    want = dict({"max": maximum} if maximum else {}, containers=budgets)
    got = json.loads(mutated["metadata"]["annotations"].get("gpucap.io/budgets", "null"))
    check(got == want and list(got["containers"]) == list(budgets), f"{fx}: the budget record {got} != {want}")
    other_meta = {k: v for k, v in mutated["metadata"].items() if k != "annotations"}
    check(other_meta == {k: v for k, v in pod["metadata"].items() if k != "annotations"}, f"{fx}: metadata unchanged")
    check({k: v for k, v in spec_a.items() if k not in ("containers", "initContainers", "volumes")} ==
          {k: v for k, v in spec_b.items() if k not in ("containers", "initContainers", "volumes")},
          f"{fx}: rest of the spec unchanged")
    # The webhook adds no violation of the restricted level to any pod.
    new = set(pss_restricted.violations(mutated)) - set(pss_restricted.violations(pod))
    check(not new, f"{fx}: the mutation adds restricted violations {sorted(new)}")
    if fx.startswith(RESTRICTED):
        check(pss_restricted.violations(pod) == [] and pss_restricted.violations(mutated) == [],
              f"{fx}: a restricted pod stays restricted: {pss_restricted.violations(mutated)}")

    # Reinvocation: the mutated pod goes through again and nothing more is added.
    again = copy.deepcopy(review)
    again["request"]["object"] = mutated
    status, out2 = run(cli, args, again)
    check(status == 200 and out2["response"]["allowed"] is True, f"{fx}: second pass allowed {out2['response']}")
    check("patch" not in out2["response"], f"{fx}: second pass adds nothing, got "
          f"{base64.b64decode(out2['response'].get('patch', '')).decode()}")


def check_warnings(fx, resp):
    want, got = WARNINGS.get(fx, WARNINGS.get(fx.split(" ")[0], [])), resp.get("warnings", [])
    check(isinstance(got, list) and len(got) == len(want) and all(isinstance(w, str) and f in w and len(w) <= 256
                                                                   for f, w in zip(want, got)),
          f"{fx}: warnings {got} != {want}")


def with_container(review, change):
    r = copy.deepcopy(review)
    change(r["request"]["object"]["spec"]["containers"][0], r["request"]["object"])
    return r


def env(name, value):
    return lambda c, pod: c.setdefault("env", []).append({"name": name, "value": value})


def mount(path):
    return lambda c, pod: c.setdefault("volumeMounts", []).append({"name": "data", "mountPath": path})


def annotate(key, value):
    return lambda c, pod: pod["metadata"]["annotations"].__setitem__(key, value)


def sidecar_mount(c, pod):
    pod["spec"]["containers"].append({"name": "side", "image": "busybox",
                                      "volumeMounts": [{"name": "gpucap-lib", "mountPath": "/x"}]})


def env_from_prefix(c, pod):
    c["envFrom"] = [{"prefix": "GPUCAP_", "configMapRef": {"name": "mine"}}]


# name: (webhook arguments, change to annotated-bare's pod (8GiB, namespace ml), fragments of the denial
# or None when the pod must be allowed)
ESCAPES = {
    "memory_limit": ([], env("GPUCAP_MEMORY_LIMIT", "100%"), ["GPUCAP_MEMORY_LIMIT", "100%"]),
    "mode_audit": ([], env("GPUCAP_MODE", "audit"), ["GPUCAP_MODE", "audit"]),
    # Burstable memory (issue 35): the request and the grant are the platform's too.
    "memory_request": ([], env("GPUCAP_MEMORY_REQUEST", "8GiB"), ["GPUCAP_MEMORY_REQUEST", "8GiB"]),
    "memory_grant": ([], env("GPUCAP_MEMORY_GRANT", "100%"), ["GPUCAP_MEMORY_GRANT", "100%"]),
    "request_above_limit": ([], annotate("gpucap.io/memory-request", "9GiB"), ["9GiB", "above its limit 8GiB"]),
    "ledger_off": ([], env("GPUCAP_LEDGER", "off"), ["GPUCAP_LEDGER", "off"]),
    "config_null": ([], env("GPUCAP_CONFIG", "/dev/null"), ["GPUCAP_CONFIG", "/dev/null"]),
    "identity_forged": ([], env("GPUCAP_POD_NAME", "someone-else"), ["GPUCAP_POD_NAME"]),
    "env_from_prefix": ([], env_from_prefix, ["envFrom[0]", "GPUCAP_"]),
    "above_max": (["--max-memory", "4GiB"], lambda c, pod: None, ["8GiB", "4GiB", "above the maximum"]),
    "mount_etc_gpucap": ([], mount("/etc/gpucap"), ["/etc/gpucap", "container train"]),
    "mount_ini": ([], mount("/etc/gpucap/gpucap.ini"), ["/etc/gpucap/gpucap.ini"]),
    "mount_preload": ([], mount("/etc/ld.so.preload"), ["/etc/ld.so.preload"]),
    "mount_lib": ([], mount("/usr/local/gpucap/lib"), ["/usr/local/gpucap/lib"]),
    "mount_ledger": ([], mount("/run/gpucap"), ["/run/gpucap"]),
    "sidecar_mounts_lib": ([], sidecar_mount, ["container side", "gpucap-lib"]),
    "preload_env_untrusted": ([], annotate("gpucap.io/preload", "env"), ["gpucap.io/preload", "trusted"]),
    "visible_devices_deny": (["--visible-devices", "deny"],
                             lambda c, pod: (c["resources"].clear(), env("NVIDIA_VISIBLE_DEVICES", "all")(c, pod)),
                             ["NVIDIA_VISIBLE_DEVICES"]),
    # A trusted namespace may set its own variables and mounts.
    "trusted_memory_limit": (["--trusted-namespaces", "ml"], env("GPUCAP_MEMORY_LIMIT", "100%"), None),
    "trusted_mount": (["--trusted-namespaces", "ml"], mount("/etc/gpucap"), None),
}


def run_escape(cli, fixtures, name):
    args, change, fragments = ESCAPES[name]
    review = with_container(load(fixtures, "annotated-bare"), change)
    status, out = run(cli, args + ["--image", IMAGE], review)
    resp = out["response"]
    if fragments is None:
        check(status == 200 and resp["allowed"] is True and "patch" in resp, f"{name}: trusted namespace allowed")
        return
    msg = resp.get("status", {}).get("message", "")
    check(status == 200 and resp["allowed"] is False, f"{name}: denied")
    for f in fragments:
        check(f in msg, f"{name}: the denial names {f!r}: {msg!r}")
    check("patch" not in resp, f"{name}: no patch with a denial")


def variants(cli, fixtures):
    """Generated cases: namespace policy, DRA claims, NVIDIA_VISIBLE_DEVICES, fixtures made restricted."""
    base = load(fixtures, "default-budget")
    with tempfile.TemporaryDirectory() as tmp:
        policy = os.path.join(tmp, "policy.ini")
        with open(policy, "w") as f:
            f.write("[ml]\nmax_memory = 4GiB\ndefault_memory = 2GiB\n\n[research]\ntrusted = true\n")
        pargs = ["--namespace-policy", policy, "--default-memory", "25%"]
        check_fixture(cli, base, "default-budget (namespace default)", pargs, {"train": "2GiB"}, "4GiB")
        status, out = run(cli, pargs + ["--image", IMAGE], load(fixtures, "annotated-bare"))
        msg = out["response"].get("status", {}).get("message", "")
        check(out["response"]["allowed"] is False and "8GiB" in msg and "4GiB" in msg and "namespace policy" in msg,
              f"namespace maximum: annotation 8GiB denied naming both: {msg}")
        small = copy.deepcopy(load(fixtures, "annotated-bare"))
        small["request"]["object"]["metadata"]["annotations"]["gpucap.io/memory"] = "1GiB"
        check_fixture(cli, small, "annotated-bare (1GiB, below the namespace max)", pargs, {"train": "1GiB"}, "4GiB")
        with open(policy, "w") as f:
            f.write("[ml]\nmax_memory = lots\n")
        out = subprocess.run([cli, "--image", IMAGE, "--namespace-policy", policy], input=b"{}", capture_output=True)
        check(out.returncode == 1 and b"line 2" in out.stderr and b"lots" in out.stderr,
              f"a bad policy file is refused at start: {out.stderr}")

    claim = copy.deepcopy(base)
    c = claim["request"]["object"]["spec"]["containers"][0]
    c["resources"] = {"claims": [{"name": "gpu"}]}
    claim["request"]["object"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "one-gpu"}]
    check_fixture(cli, claim, "default-budget (DRA claim)", ["--default-memory", "25%", "--dra-claims", "true"],
                  {"train": "25%"}, "25%")
    check_fixture(cli, claim, "default-budget (DRA claim, flag off)", ["--default-memory", "25%"], {}, None)

    for value, chosen in (("all", True), ("GPU-0a1b2c3d-0000-1111-2222-333344445555", True), ("0,1", True),
                          ("none", False), ("void", False), ("", False)):
        vis = copy.deepcopy(base)
        c = vis["request"]["object"]["spec"]["containers"][0]
        c["resources"] = {}
        c.setdefault("env", []).append({"name": "NVIDIA_VISIBLE_DEVICES", "value": value})
        check_fixture(cli, vis, f"default-budget (NVIDIA_VISIBLE_DEVICES={value})", ["--default-memory", "25%"],
                      {"train": "25%"} if chosen else {}, "25%")
        check_fixture(cli, vis, f"default-budget (NVIDIA_VISIBLE_DEVICES={value}, ignore)",
                      ["--default-memory", "25%", "--visible-devices", "ignore"], {}, None)

    # A trusted namespace may choose LD_PRELOAD by annotation.
    ann = copy.deepcopy(load(fixtures, "annotated-bare"))
    ann["request"]["object"]["metadata"]["annotations"]["gpucap.io/preload"] = "env"
    check_fixture(cli, ann, "annotated-bare (trusted, preload env)", ["--trusted-namespaces", "ml", "--preload", "env"],
                  {"train": "8GiB"}, None)


def set_annotation(key, value):
    return lambda pod: pod["metadata"]["annotations"].__setitem__(key, value)


def set_limit(name, value):
    return lambda pod: pod["spec"]["containers"][0]["resources"].setdefault("limits", {}).__setitem__(name, value)


# Scheduler requests the webhook refuses: (fixture, change to its pod, webhook arguments, fragments of
# the denial). Each names the annotation or resource and the accepted forms; one above the maximum
# names the request, where it comes from, and the maximum.
SCHED_DENIALS = {
    "fraction 1.5": ("sched-bad-fraction", None, [], ['annotation gpu-fraction: "1.5"', "accepted", "such as 0.5"]),
    "fraction text": ("kai-fraction", set_annotation("gpu-fraction", "half"), [],
                      ['annotation gpu-fraction: "half"', "accepted"]),
    "fraction 0": ("kai-fraction", set_annotation("gpu-fraction", "0"), [], ['gpu-fraction: "0"', "above 0"]),
    "negative memory": ("sched-negative-mib", None, [], ['annotation gpu-memory: "-2000"', "accepted: a whole number"]),
    "memory text": ("kai-mib", set_annotation("gpu-memory", "2Gi"), [], ['gpu-memory: "2Gi"', "accepted"]),
    "devices text": ("kai-num-devices", set_annotation("gpu-fraction-num-devices", "two"), [],
                     ['gpu-fraction-num-devices: "two"', "accepted"]),
    "no such container": ("kai-init-container", set_annotation("gpu-fraction-container-name", "gone"), [],
                          ['gpu-fraction-container-name: "gone"', "names no container"]),
    "HAMi text": ("sched-bad-text", None, [], ['resource nvidia.com/gpumem: "3GB"', "accepted", "MiB per GPU"]),
    "HAMi negative": ("hami-gpumem", set_limit("nvidia.com/gpumem", "-3000"), [], ['nvidia.com/gpumem: "-3000"']),
    "HAMi percentage 150": ("hami-gpumem-percentage", set_limit("nvidia.com/gpumem-percentage", "150"), [],
                            ['nvidia.com/gpumem-percentage: "150"', "from 1 to 100"]),
    "KAI and HAMi on one container": ("kai-mib", set_limit("nvidia.com/gpumem", "1000"), [],
                                      ["container trainer", "2000MiB", "1000MiB", "use one"]),
    "KAI memory above the cluster max": ("kai-mib", None, ["--max-memory", "1GiB"],
                                         ["container trainer asks for 2000MiB (KAI annotation gpu-memory)",
                                          "above the maximum 1GiB (cluster --max-memory)"]),
    "KAI fraction above the cluster max": ("kai-fraction", None, ["--max-memory", "40%"],
                                           ["50% (KAI annotation gpu-fraction)", "maximum 40%"]),
    "KAI init container above the cluster max": ("kai-init-container", None, ["--max-memory", "20%"],
                                                 ["container warmup asks for 25%", "maximum 20%"]),
    "HAMi above the cluster max": ("hami-gpumem", None, ["--max-memory", "2GiB"],
                                   ["3000MiB (HAMi resource nvidia.com/gpumem)", "maximum 2GiB"]),
    "HAMi percentage above the cluster max": ("hami-gpumem-percentage", None, ["--max-memory", "30%"],
                                              ["50% (HAMi resource nvidia.com/gpumem-percentage)", "maximum 30%"]),
    # gpucap's annotation comes after the scheduler's request, and the maximum bounds it too.
    "mixed: the annotation above the cluster max": ("sched-mixed", None, ["--max-memory", "4GiB"],
                                                    ["container helper asks for 6GiB (annotation gpucap.io/memory)",
                                                     "maximum 4GiB"]),
}


def scheduler_requests(cli, fixtures):
    """Scheduler requests denied, then bounded by a namespace maximum (policy file)."""
    for label, (fx, change, args, fragments) in SCHED_DENIALS.items():
        review = copy.deepcopy(load(fixtures, fx))
        if change:
            change(review["request"]["object"])
        status, out = run(cli, args + ["--image", IMAGE], review)
        resp = out["response"]
        msg = resp.get("status", {}).get("message", "")
        check(status == 200 and resp["allowed"] is False and "patch" not in resp, f"{label}: denied: {resp}")
        for f in fragments:
            check(f in msg, f"{label}: the denial names {f!r}: {msg!r}")
    with tempfile.TemporaryDirectory() as tmp:
        policy = os.path.join(tmp, "policy.ini")
        with open(policy, "w") as f:
            f.write("[ml]\nmax_memory = 1GiB\n")
        pargs = ["--namespace-policy", policy, "--max-memory", "16GiB", "--image", IMAGE]
        status, out = run(cli, pargs, load(fixtures, "sched-mixed"))
        msg = out["response"].get("status", {}).get("message", "")
        check(out["response"]["allowed"] is False and "container trainer asks for 2000MiB (KAI annotation gpu-memory)"
              in msg and "above the maximum 1GiB (namespace policy)" in msg,
              f"namespace maximum: KAI gpu-memory 2000 denied naming both: {msg}")
        with open(policy, "w") as f:
            f.write("[ml]\nmax_memory = 30%\n")
        status, out = run(cli, pargs, load(fixtures, "kai-fraction"))
        msg = out["response"].get("status", {}).get("message", "")
        check(out["response"]["allowed"] is False and "50% (KAI annotation gpu-fraction)" in msg and
              "maximum 30% (namespace policy)" in msg, f"namespace maximum: KAI fraction 0.5 denied naming both: {msg}")
        with open(policy, "w") as f:
            f.write("[ml]\nmax_memory = 60%\n")
        check_fixture(cli, load(fixtures, "kai-fraction"), "kai-fraction (namespace max 60%)",
                      ["--namespace-policy", policy], {"trainer": "50%", "log-shipper": "60%"}, "60%")


def reinvocation(cli, fixtures):
    """Another webhook adds a GPU container (or its own init container first) after our pass."""
    review = load(fixtures, "annotated-bare")
    args = ["--image", IMAGE]
    _, out = run(cli, args, review)
    mutated = jsonpatch.apply_patch(review["request"]["object"], json.loads(base64.b64decode(out["response"]["patch"])))
    later = copy.deepcopy(mutated)
    later["spec"]["containers"].append({"name": "late", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}})
    later["spec"]["initContainers"].insert(0, {"name": "istio-init", "image": "proxy"})
    again = copy.deepcopy(review)
    again["request"]["object"] = later
    status, out = run(cli, args, again)
    resp = out["response"]
    check(resp["allowed"] is True and "patch" in resp, f"reinvocation with a new GPU container: {resp}")
    if "patch" not in resp:
        return
    ops = json.loads(base64.b64decode(resp["patch"]))
    final = jsonpatch.apply_patch(later, ops)
    inits = final["spec"]["initContainers"]
    check([c["name"] for c in inits] == ["istio-init", "gpucap-init"], f"init containers {[c['name'] for c in inits]}")
    check(inits[1]["command"][-2:] == ["train=8GiB", "late=8GiB"], f"our init container now covers late: {inits[1]}")
    check(final["spec"]["containers"][0] == mutated["spec"]["containers"][0], "train untouched the second time")
    check_container("reinvocation", later["spec"]["containers"][1], final["spec"]["containers"][1], False, False)
    check(final["metadata"]["annotations"]["gpucap.io/injected"] == "train,late", "annotation lists both")
    third = copy.deepcopy(review)
    third["request"]["object"] = final
    _, out = run(cli, args, third)
    check("patch" not in out["response"], f"third pass adds nothing: {out['response']}")

    # A tenant's own gpucap-init is replaced by ours; a GPU init container before ours is denied.
    forged = copy.deepcopy(review)
    forged["request"]["object"]["spec"]["initContainers"] = [
        {"name": "gpucap-init", "image": IMAGE, "command": ["sh", "-c", "echo '[gpucap]' > /gpucap-out/lib/x"]}]
    _, out = run(cli, args, forged)
    resp = out["response"]
    ops = json.loads(base64.b64decode(resp.get("patch", "W10=")))
    check(resp["allowed"] is True and any(o["op"] == "replace" and o["path"] == "/spec/initContainers/0" and
                                          o["value"]["command"][0] == "/usr/local/gpucap/bin/gpucap" for o in ops),
          f"a forged gpucap-init is replaced by ours: {resp}")
    early = copy.deepcopy(mutated)
    early["spec"]["initContainers"].insert(0, {"name": "early", "image": "cuda",
                                               "resources": {"limits": {"nvidia.com/gpu": 1}}})
    again["request"]["object"] = early
    _, out = run(cli, args, again)
    msg = out["response"].get("status", {}).get("message", "")
    check(out["response"]["allowed"] is False and "early" in msg and "gpucap-init" in msg,
          f"a GPU init container before gpucap-init is denied: {msg}")


def match_conditions(fixtures):
    """The webhook configuration's matchConditions send every pod the webhook changes or refuses."""
    conf = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples/kubernetes/mutatingwebhook.yaml")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "match_conditions.py")
    pods = [[label, pod] for label, pod, _ in decided]
    plain = copy.deepcopy(load(fixtures, "no-gpu")["request"]["object"])
    del plain["metadata"]["annotations"]
    pods.append(["no-gpu", plain])
    for interp in (sys.executable, shutil.which("python3") or sys.executable):
        out = subprocess.run([interp, script, conf], input=json.dumps(pods), capture_output=True, text=True)
        if out.returncode != 77:
            break
    if out.returncode == 77:
        print("note: cel-python is not installed; matchConditions not evaluated")
        return
    check(out.returncode == 0, f"matchConditions evaluate: {out.stderr}")
    if out.returncode != 0:
        return
    matched = dict(json.loads(out.stdout))
    for label, pod, acted in decided:
        if acted:
            check(matched[label], f"matchConditions skip a pod the webhook changes or refuses: {label} "
                                  f"{json.dumps(pod)[:300]}")
    check(not matched["no-gpu"], "matchConditions leave a pod without a GPU out")
    print(f"matchConditions: {sum(1 for _, _, a in decided if a)} acted-on pods all sent, "
          f"{sum(1 for v in matched.values() if not v)} of {len(matched)} pods left out")


def kubernetes_validate():
    """The mutated pods against the last three Kubernetes schemas, strictly (no unknown fields)."""
    tool = shutil.which("kubernetes-validate")
    if not tool:
        print("note: kubernetes-validate is not installed; schema validation skipped")
        return
    versions = subprocess.run([tool, "--version"], capture_output=True, text=True)
    # The schema versions it bundles, asked of the interpreter pip installed it for (not necessarily ours).
    for interp in (sys.executable, shutil.which("python3") or sys.executable):
        listing = subprocess.run([interp, "-c", "import kubernetes_validate as k, os; print(*os.listdir(os.path.join("
                                  "os.path.dirname(k.__file__), 'kubernetes-json-schema')))"],
                                 capture_output=True, text=True)
        if listing.returncode == 0:
            break
    minors = sorted({tuple(int(x) for x in d[1:].split("-")[0].split(".")[:2]) for d in listing.stdout.split()
                     if d.startswith("v1.")})[-3:]
    check(len(minors) == 3, f"kubernetes-validate bundles three minor versions: {listing.stdout} {listing.stderr}")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, (fx, pod) in enumerate(mutated_pods):
            p = dict(pod, apiVersion="v1", kind="Pod")
            p["metadata"] = dict(p["metadata"], name=p["metadata"].get("name") or "generated")
            p["metadata"].pop("creationTimestamp", None)
            p.pop("status", None)
            path = os.path.join(tmp, f"pod{i}.json")
            with open(path, "w") as f:
                json.dump(p, f)
            files.append(path)
        for major, minor in minors:
            out = subprocess.run([tool, "--strict", "--quiet", "-k", f"{major}.{minor}.0", *files],
                                 capture_output=True, text=True)
            check(out.returncode == 0, f"kubernetes-validate {major}.{minor}: {out.stdout} {out.stderr}")
        print(f"kubernetes-validate {versions.stdout.strip()}: {len(files)} mutated pods valid for "
              f"{', '.join(f'{a}.{b}' for a, b in minors)}")


def main():
    cli, fixtures = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3 and sys.argv[3] == "--escape":
        run_escape(cli, fixtures, sys.argv[4])
    else:
        for fx, (args, budgets, maximum) in CASES.items():
            check_fixture(cli, load(fixtures, fx), fx, args, budgets, maximum)
        variants(cli, fixtures)
        scheduler_requests(cli, fixtures)
        reinvocation(cli, fixtures)
        for name in ESCAPES:
            run_escape(cli, fixtures, name)
        match_conditions(fixtures)
        kubernetes_validate()
    return verdict(f"ok: {len(CASES)} fixtures and their variants, patches applied with jsonpatch {jsonpatch.__version__}"
                   if len(sys.argv) <= 3 else f"ok: escape {sys.argv[4]}")


if __name__ == "__main__":
    sys.exit(main())
