# SPDX-License-Identifier: Apache-2.0
"""common.py: what the real-client checks (torch_checks.py, cupy_checks.py, jax_checks.py) share:
the budget they run under, the verdict line ("PASS name: figures" / "FAIL name: ..."), what
stopped an allocation loop, and whether the driver is the fake one (tests/fake)."""
import ctypes
import os
import sys

MiB = 1 << 20
GiB = 1 << 30


def budget():
    """GPUCAP_MEMORY_LIMIT, in bytes (checks.sh always passes bytes)."""
    return int(os.environ["GPUCAP_MEMORY_LIMIT"])


def reserve():
    """What gpucap reserves per context (RESERVE, bytes; checks.sh sets it with GPUCAP_CONTEXT_RESERVE)."""
    return int(os.environ.get("RESERVE", "0"))


_fails = 0


class Failure:
    """What stopped an allocation loop: the exception's class and text, not the exception (whose
    traceback would keep the loop's frame, and every buffer it held, alive)."""

    def __init__(self, e):
        self.kind = type(e)
        self.text = str(e)


def verdict(ok, name, msg):
    global _fails
    print(("PASS" if ok else "FAIL"), f"{name}: {msg}", flush=True)
    _fails += 0 if ok else 1


def done():
    sys.exit(1 if _fails else 0)


def mib(n):
    return f"{n / MiB:.0f} MiB"


def on_fake():
    """True when libcuda.so.1 is the fake driver (it exports its inspection API, fakecuda.h)."""
    try:
        return hasattr(ctypes.CDLL("libcuda.so.1"), "fakecuda_processes")
    except OSError:
        return False
