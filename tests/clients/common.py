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
    return _fake() is not None


_fake_lib = False


def _fake():
    """The fake driver's inspection API (tests/fake/fakecuda.h), or None on a real driver."""
    global _fake_lib
    if _fake_lib is False:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            _fake_lib = lib if hasattr(lib, "fakecuda_processes") else None
        except OSError:
            _fake_lib = None
        if _fake_lib is not None:
            for name in ("fakecuda_peak", "fakecuda_outstanding", "fakecuda_table_unmodelled_calls", "fakecuda_calls"):
                getattr(_fake_lib, name).restype = ctypes.c_uint64
            _fake_lib.fakecuda_calls.argtypes = [ctypes.c_char_p]
    return _fake_lib


def fake_reset_peak():
    """On the fake driver, the card's peak starts again from what it holds now (device 0)."""
    if _fake() is not None:
        _fake().fakecuda_reset_peak(0)


def fake_peak():
    """The most the fake card (device 0) held since fake_reset_peak, by its own record; None on a GPU."""
    return _fake().fakecuda_peak(0) if _fake() is not None else None


def fake_calls(name):
    """Calls of a driver entry point in this process, by the fake's counters; None on a GPU."""
    return _fake().fakecuda_calls(name.encode()) if _fake() is not None else None


def fake_unmodelled():
    """Calls of private-table slots the fake does not model (each answered with an error a real
    driver would not give); None on a GPU."""
    return _fake().fakecuda_table_unmodelled_calls() if _fake() is not None else None
