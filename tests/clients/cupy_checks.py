# SPDX-License-Identifier: Apache-2.0
"""cupy_checks.py CASE: CuPy (its own copy of the CUDA runtime, kernels compiled by NVRTC) under
gpucap's budget, run by checks.sh. Cases:
  default   the default memory pool: cupy.cuda.memory.OutOfMemoryError at the budget;
            free_all_blocks, and a second fill gets as much again (nothing left charged)
  async     the same with cupy.cuda.MemoryAsyncPool (cudaMallocAsync's stream-ordered pool)
  pinned    pinned host memory of twice the budget (cupy.cuda.alloc_pinned_memory) is not charged:
            the device still fills to the budget
  kernel    an elementwise kernel and a reduction run (NVRTC compiles, the module loads)
"""
import sys

import common
from common import Failure, MiB, budget, mib, reserve, verdict

import cupy

CHUNK = 64 * MiB


def fill():
    held, err = [], None
    try:
        while len(held) < 100000:
            held.append(cupy.empty(CHUNK, dtype=cupy.uint8))
    except Exception as e:
        # The exception itself is not kept: its traceback holds this frame, and so every array.
        err = Failure(e)
    return held, err


def check_fill(name):
    b = budget()
    held, err = fill()
    first = len(held) * CHUNK
    verdict(err is not None and err.kind is cupy.cuda.memory.OutOfMemoryError and first <= b and first + CHUNK + reserve() >= b,
            name, f"{(err.kind.__name__ if err else None)} after {mib(first)} of {mib(b)}")
    del held
    pool = cupy.get_default_memory_pool() if name == "cupy.default" else None
    if pool:
        pool.free_all_blocks()
    else:
        cupy.cuda.runtime.deviceSynchronize()
        cupy.cuda.get_allocator().__self__.free_all_blocks()
    held, err = fill()
    again = len(held) * CHUNK
    verdict(first > 0 and again + CHUNK >= first and again <= b, f"{name}.again",
            f"after free_all_blocks a second fill got {mib(again)} (first {mib(first)})")


def case_default():
    check_fill("cupy.default")


def case_async():
    cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc)
    check_fill("cupy.async")


def case_pinned():
    b = budget()
    pinned = cupy.cuda.alloc_pinned_memory(2 * b)
    held, err = fill()
    got = len(held) * CHUNK
    verdict(got + CHUNK + reserve() >= b and got <= b, "cupy.pinned",
            f"with {mib(2 * b)} pinned on the host, the device filled to {mib(got)} of {mib(b)}")
    del pinned


def case_kernel():
    a = cupy.arange(1 << 20, dtype=cupy.float32)
    s = float((a * 2 + 1).sum())
    verdict(True, "cupy.kernel", f"an elementwise kernel and a reduction ran (result {s:.0f}: the fake computes nothing)")


CASES = {"default": case_default, "async": case_async, "pinned": case_pinned, "kernel": case_kernel}

if __name__ == "__main__":
    CASES[sys.argv[1]]()
    common.done()
