#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""qos_worker.py N MIB [HOLD_S]: a CUDA job for bench/qos.sh (run under `gpucap run`, the library
preloaded): N allocations of MIB MiB each with cuMemAlloc_v2 (through ctypes, as a framework calls
the driver), each timed; prints "allocs=N failed=F p50_ms=.. p99_ms=.. max_ms=.. first_ms=..", then
holds what it has for HOLD_S seconds (default 0)."""
import ctypes
import sys
import time


def main():
    n, mib = int(sys.argv[1]), int(sys.argv[2])
    hold = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    cu = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cu.cuInit(0) == 0
    assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    times, failed, ptrs = [], 0, []
    for _ in range(n):
        p = ctypes.c_uint64()
        t0 = time.perf_counter()
        rc = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(mib << 20))
        times.append((time.perf_counter() - t0) * 1000)
        if rc == 0:
            ptrs.append(p.value)
        else:
            failed += 1
    s = sorted(times)
    print("allocs=%d failed=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f first_ms=%.3f" % (
        n, failed, s[len(s) // 2], s[min(len(s) - 1, int(len(s) * 0.99))], s[-1], times[0]), flush=True)
    if hold > 0:
        time.sleep(hold)


if __name__ == "__main__":
    main()
