#!/usr/bin/python3
"""check_patch.py: the webhook's patches applied with a real JSON Patch implementation.

usage: check_patch.py ADMISSION_CLI FIXTURE_DIR

For each fixture the handler's base64 JSONPatch is decoded and applied to the request's pod with
Debian's python3-jsonpatch (RFC 6902, strict about paths), then the resulting pod is checked field
by field: chosen containers carry LD_PRELOAD (user libraries kept first), GPUCAP_MEMORY_LIMIT, a
ledger path of their own and the read-only mount; every other container and field is unchanged;
there is one library volume. The mutated pod is then sent through the handler again (what
reinvocation does) and must come back with no patch. Exit 0 pass, 1 fail, 77 without jsonpatch.
"""
import base64
import copy
import json
import os
import subprocess
import sys

try:
    import jsonpatch
except ImportError:
    print("python3-jsonpatch is not installed; skipping")
    sys.exit(77)

LIB = "/var/lib/gpucap"
GPU = ("nvidia.com/gpu", "nvidia.com/gpu.shared")

# fixture: (webhook arguments, budget the chosen containers get, names of the chosen containers)
CASES = {
    "annotated-bare": ([], "8GiB", ["train"]),
    "annotated-env-volumes": ([], "12.5%", ["train"]),
    "existing-ld-preload": ([], "4GiB", ["app"]),
    "ld-preload-valuefrom": ([], "4GiB", ["app"]),
    "init-containers": ([], "2GiB", ["warmup", "serve"]),
    "several-containers": ([], "6GiB", ["a", "b"]),
    "default-budget": (["--default-memory", "25%"], "25%", ["train"]),
    "no-gpu": (["--default-memory", "25%"], None, []),
    "gpu-zero": ([], None, []),
    "opt-out": (["--default-memory", "25%"], None, []),
    "update": (["--default-memory", "25%"], None, []),
}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def run(cli, args, review):
    out = subprocess.run([cli] + args, input=json.dumps(review).encode(), capture_output=True, check=True)
    status, _, body = out.stdout.decode().partition("\n")
    return int(status), json.loads(body) if body else None


def wants_gpu(c):
    res = c.get("resources") or {}
    for kind in ("limits", "requests"):
        for name in GPU:
            q = (res.get(kind) or {}).get(name)
            if q is not None and str(q).strip("0. ") != "":
                return True
    return False


def env_of(c):
    return {e["name"]: e for e in c.get("env") or [] if "name" in e}


def check_container(fx, before, after, budget, lib, ledger_dir):
    name = before["name"]
    env = env_of(after)
    preload = env.get("LD_PRELOAD", {}).get("value", "")
    libpath = lib + "/libgpucap.so"
    tokens = preload.replace(" ", ":").split(":")
    check(tokens.count(libpath) == 1, f"{fx}/{name}: LD_PRELOAD {preload!r} names {libpath} once")
    old = env_of(before).get("LD_PRELOAD")
    if old and old.get("value"):
        check(preload.startswith(old["value"] + ":"), f"{fx}/{name}: user LD_PRELOAD kept first: {preload!r}")
    if old and "valueFrom" in old:
        check(env.get("LD_PRELOAD_BEFORE_GPUCAP", {}).get("valueFrom") == old["valueFrom"],
              f"{fx}/{name}: LD_PRELOAD from a reference moved to LD_PRELOAD_BEFORE_GPUCAP")
        names = [e["name"] for e in after["env"]]
        check(names.index("LD_PRELOAD_BEFORE_GPUCAP") + 1 == names.index("LD_PRELOAD"),
              f"{fx}/{name}: LD_PRELOAD_BEFORE_GPUCAP defined just before LD_PRELOAD")
        check(preload == "$(LD_PRELOAD_BEFORE_GPUCAP):" + libpath, f"{fx}/{name}: LD_PRELOAD expands the user's")
    user_limit = env_of(before).get("GPUCAP_MEMORY_LIMIT")
    want = user_limit["value"] if user_limit else budget
    check(env.get("GPUCAP_MEMORY_LIMIT", {}).get("value") == want, f"{fx}/{name}: GPUCAP_MEMORY_LIMIT == {want}")
    check(env.get("GPUCAP_LEDGER", {}).get("value") == f"{ledger_dir}/gpucap-{name}.ledger",
          f"{fx}/{name}: GPUCAP_LEDGER private to the container")
    # Every variable the user had is still there, same value, same order.
    kept = [e for e in after.get("env") or [] if e["name"] not in
            ("LD_PRELOAD", "GPUCAP_MEMORY_LIMIT", "GPUCAP_LEDGER", "LD_PRELOAD_BEFORE_GPUCAP")]
    user = [e for e in before.get("env") or [] if e.get("name") not in ("LD_PRELOAD", "GPUCAP_MEMORY_LIMIT")]
    check(kept == user, f"{fx}/{name}: user env unchanged")
    mounts = [m for m in after.get("volumeMounts") or [] if m.get("mountPath") == lib]
    check(mounts == [{"name": "gpucap-lib", "mountPath": lib, "readOnly": True}],
          f"{fx}/{name}: one read-only mount of {lib}: {mounts}")
    check([m for m in after.get("volumeMounts") or [] if m.get("mountPath") != lib] == (before.get("volumeMounts") or []),
          f"{fx}/{name}: user mounts unchanged")
    rest_a = {k: v for k, v in after.items() if k not in ("env", "volumeMounts")}
    rest_b = {k: v for k, v in before.items() if k not in ("env", "volumeMounts")}
    check(rest_a == rest_b, f"{fx}/{name}: nothing else in the container changed")


def check_fixture(cli, path, fx, args, budget, chosen, lib=LIB, ledger_dir="/tmp"):
    with open(path) as f:
        review = json.load(f)
    args = args + ["--lib-dir", lib, "--ledger-dir", ledger_dir]
    status, out = run(cli, args, review)
    resp = out["response"]
    check(status == 200 and resp["allowed"] is True, f"{fx}: allowed")
    check(resp["uid"] == review["request"]["uid"], f"{fx}: uid echoed")
    pod = review["request"]["object"]
    if budget is None:
        check("patch" not in resp, f"{fx}: no patch")
        return
    check(resp.get("patchType") == "JSONPatch", f"{fx}: patchType JSONPatch")
    ops = json.loads(base64.b64decode(resp["patch"], validate=True))
    mutated = jsonpatch.apply_patch(pod, ops)  # raises on any path that does not exist

    check(pod == review["request"]["object"], f"{fx}: input untouched")
    spec_b, spec_a = pod["spec"], mutated["spec"]
    for field in ("initContainers", "containers"):
        for before, after in zip(spec_b.get(field) or [], spec_a.get(field) or []):
            if before["name"] in chosen:
                check(wants_gpu(before), f"{fx}: {before['name']} chosen only because it requests a GPU")
                check_container(fx, before, after, budget, lib, ledger_dir)
            else:
                check(before == after, f"{fx}: {before['name']} (no GPU) left alone")
        check(len(spec_b.get(field) or []) == len(spec_a.get(field) or []), f"{fx}: no container added")
    ledgers = [env_of(c)["GPUCAP_LEDGER"]["value"] for f in ("initContainers", "containers")
               for c in spec_a.get(f) or [] if "GPUCAP_LEDGER" in env_of(c)]
    check(len(ledgers) == len(set(ledgers)) == len(chosen), f"{fx}: one ledger per chosen container {ledgers}")

    vols = [v for v in spec_a.get("volumes") or [] if v["name"] == "gpucap-lib"]
    check(vols == [{"name": "gpucap-lib", "hostPath": {"path": lib, "type": "Directory"}}], f"{fx}: one library volume")
    check([v for v in spec_a.get("volumes") or [] if v["name"] != "gpucap-lib"] == (spec_b.get("volumes") or []),
          f"{fx}: other volumes unchanged")
    check(mutated["metadata"]["annotations"].get("gpucap.io/injected") == ",".join(chosen), f"{fx}: injected annotation")
    other_meta = {k: v for k, v in mutated["metadata"].items() if k != "annotations"}
    check(other_meta == {k: v for k, v in pod["metadata"].items() if k != "annotations"}, f"{fx}: metadata unchanged")
    check({k: v for k, v in spec_a.items() if k not in ("containers", "initContainers", "volumes")} ==
          {k: v for k, v in spec_b.items() if k not in ("containers", "initContainers", "volumes")},
          f"{fx}: rest of the spec unchanged")

    # Reinvocation: the mutated pod goes through again and nothing more is added.
    again = copy.deepcopy(review)
    again["request"]["object"] = mutated
    status, out2 = run(cli, args, again)
    check(status == 200 and out2["response"]["allowed"] is True, f"{fx}: second pass allowed")
    check("patch" not in out2["response"], f"{fx}: second pass adds nothing, got "
          f"{base64.b64decode(out2['response'].get('patch', '')).decode()}")


def main():
    cli, fixtures = sys.argv[1], sys.argv[2]
    for fx, (args, budget, chosen) in CASES.items():
        check_fixture(cli, os.path.join(fixtures, fx + ".json"), fx, args, budget, chosen)
    # Other directories, one with a trailing slash.
    check_fixture(cli, os.path.join(fixtures, "several-containers.json"), "several-containers (/opt/gpucap)",
                  [], "6GiB", ["a", "b"], lib="/opt/gpucap", ledger_dir="/run/gpucap")
    status, _ = run(cli, ["--lib-dir", "/opt/gpucap/"], json.load(open(os.path.join(fixtures, "annotated-bare.json"))))
    check(status == 200, "trailing slash in --lib-dir")
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print(f"ok: {len(CASES) + 1} fixtures, patches applied with jsonpatch {jsonpatch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
