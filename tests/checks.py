# SPDX-License-Identifier: Apache-2.0
"""checks.py: what the Python test scripts share. They import it by path, with tests/ put first on
sys.path: sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")).

- check(cond, what) records a failure and prints it without stopping the script; verdict(ok_line),
  the script's exit status at its end: 1 after "N failures" when a check failed, else 0 after
  printing ok_line.
- The example manifests as Kubernetes takes them: load_yaml(path), the objects of a YAML file;
  render(path), the objects `kubectl kustomize` renders from a kustomization (a failed check when
  it cannot); by_kind(docs), the objects by their kind. These need python3-yaml, which the scripts
  that call them check for first (exit 77 without it).
- by_name(case, ...), the cases of a script by their function's name; run_cases(cases), the main of a script of cases by name (a dict of name -> case(cli, fixtures)):
  `--list` prints the names joined by ';' (ctest registers one test each); `CLI FIXTURES NAME` runs
  that case and returns the verdict.
"""
import subprocess
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def verdict(ok_line):
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print(ok_line)
    return 0


def by_name(*cases):
    return {c.__name__: c for c in cases}


def run_cases(cases):
    if sys.argv[1:2] == ["--list"]:
        print(";".join(cases))
        return 0
    cli, fixtures, name = sys.argv[1:4]
    cases[name](cli, fixtures)
    return verdict(f"ok: {name}")


def load_yaml(path):
    import yaml  # here, not above: the checks that read no YAML do not need python3-yaml

    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def render(path):
    import yaml

    out = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True)
    check(out.returncode == 0, f"kubectl kustomize {path}: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d] if out.returncode == 0 else []


def by_kind(docs):
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    return kinds
