#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_rows.py ENTRIES_H CUDATYPEDEFS_H DRIVER_VERSION: for every base name the fake driver
exports (a row of tests/fake/entries.h), the newest variant that cudaTypedefs.h lists at or below
the driver's version (PFN_<base>_v<ver>, and the per-thread _ptsz/_ptds ones apart) must be a row
too: cuGetProcAddress answers a version with the newest row at or below it, so a missing newer
variant hands a caller asking for the newer one a function of an older ABI. Exit 0 / 1."""
import re
import sys


def main():
    entries, typedefs, driver = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rows = {}  # base -> {(version, per_thread)}
    for m in re.finditer(r"X\((\w+), (\w+), (\d+), ([01])\)", open(entries).read()):
        rows.setdefault(m.group(2), set()).add((int(m.group(3)), m.group(4) == "1"))
    if len(rows) < 100:
        print(f"only {len(rows)} base names read from {entries}")
        return 1
    pfn = {}
    for m in re.finditer(r"\bPFN_(cu\w+?)_v(\d+)(_ptsz|_ptds)?\b", open(typedefs).read()):
        pfn.setdefault(m.group(1), set()).add((int(m.group(2)), m.group(3) is not None))
    bad = 0
    for base, have in sorted(rows.items()):
        for per_thread in (False, True):
            known = [v for v, pt in pfn.get(base, ()) if pt == per_thread and v <= driver]
            mine = [v for v, pt in have if pt == per_thread]
            if not known or not mine:
                continue
            if max(known) not in mine:
                kind = "per-thread " if per_thread else ""
                print(f"{base}: the {kind}variant of version {max(known)} is missing (rows: {sorted(mine)})")
                bad += 1
    print(f"{len(rows)} base names checked, {bad} missing a newest variant")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
