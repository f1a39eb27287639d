# SPDX-License-Identifier: Apache-2.0
"""torch_checks.py CASE [ARGS]: PyTorch (its CUDA caching allocator, through the real CUDA runtime)
under gpucap's budget, on the fake driver (tests/fake) or a GPU. Run by checks.sh, which sets the
budget (GPUCAP_MEMORY_LIMIT, bytes), the allocator's settings and the ledger. Cases:
  oom NAME      64 MiB tensors until torch.OutOfMemoryError: it is that error (not a generic
                CUDA error), its "total capacity" (or the async backend's "Device limit") is the
                budget, the tensors got all of the budget but the context reserve, mem_get_info's
                total is the budget
  fraction      set_per_process_memory_fraction(0.5): the OOM comes at half the budget
  empty_cache   fill, free, empty_cache: mem_get_info's free and a second fill are back to the first's
  props         get_device_properties().total_memory is what mem_get_info says the total is
  fill          64 MiB tensors until the OOM; prints allocated=<bytes>
  hold MIB      holds MIB MiB, prints "holding", sleeps (the two-process and SIGKILL cases)
  train         a small training loop (elementwise model, autograd, SGD); prints peak_reserved=
  job MIB       allocates MIB MiB in 16 MiB tensors, frees half, exits; prints reserved= (what the
                caching allocator still holds from the driver)
  exit_now      allocates and frees (empty_cache) some, prints the caching allocator's own counts of
                driver allocations and frees (device_allocs= device_frees=), ends with os._exit
"""
import os
import re
import sys
import time

import common
from common import Failure, MiB, budget, mib, reserve, verdict

import torch

CHUNK = 64 * MiB


def fill(chunk=CHUNK):
    held, err = [], None
    try:
        while len(held) < 100000:
            held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
    except Exception as e:  # the kind is checked by the callers
        # The exception itself is not kept: its traceback holds this frame, and so every tensor.
        err = Failure(e)
    return held, err


def capacity_in(msg):
    """The total a PyTorch OOM message states, in bytes, or None."""
    m = re.search(r"total capacity of ([\d.]+) (MiB|GiB)", msg) or re.search(r"Device limit\s*:\s*([\d.]+) (MiB|GiB)", msg)
    if not m:
        return None
    return float(m.group(1)) * (MiB if m.group(2) == "MiB" else 1 << 30)


def case_oom(name="torch.oom"):
    b = budget()
    free, total = torch.cuda.mem_get_info()
    held, err = fill()
    got = len(held) * CHUNK
    cap = capacity_in(err.text) if err else None
    verdict(err is not None and err.kind is torch.OutOfMemoryError, f"{name}.error",
            f"stopped by {(err.kind.__name__ if err else None)} after {mib(got)}")
    verdict(cap is not None and abs(cap - b) <= 0.01 * b, f"{name}.capacity",
            f"the message's total capacity is {cap and mib(cap)} for a budget of {mib(b)}")
    verdict(got <= b and got + CHUNK + reserve() >= b, f"{name}.budget",
            f"the tensors got {mib(got)} of {mib(b)} (context reserve {mib(reserve())})")
    verdict(total == b, f"{name}.mem_get_info", f"mem_get_info total {total}, budget {b}")


def case_fraction():
    b = budget()
    torch.cuda.set_per_process_memory_fraction(0.5)
    held, err = fill(16 * MiB)
    got = len(held) * 16 * MiB
    verdict(err is not None and err.kind is torch.OutOfMemoryError and 0.5 * b - 16 * MiB - reserve() <= got <= 0.5 * b,
            "torch.fraction", f"with a fraction of 0.5, OOM after {mib(got)} of {mib(b)}")


def case_empty_cache():
    held, err = fill()
    first = len(held) * CHUNK
    del held
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    held, err = fill()
    again = len(held) * CHUNK
    verdict(first > 0 and free + CHUNK >= first and again + CHUNK >= first and again <= budget(), "torch.empty_cache",
            f"first fill {mib(first)}; after empty_cache {mib(free)} free and a second fill of {mib(again)}")


def case_props():
    total_memory = torch.cuda.get_device_properties(0).total_memory
    free, total = torch.cuda.mem_get_info()
    verdict(total > 0 and total_memory == total, "torch.props",
            f"get_device_properties().total_memory {total_memory}, mem_get_info total {total}")


def case_fill():
    held, err = fill()
    print(f"allocated={len(held) * CHUNK} error={(err.kind.__name__ if err else None)}", flush=True)


def case_hold(n_mib):
    held = [torch.empty(CHUNK, dtype=torch.uint8, device="cuda") for _ in range(int(n_mib) * MiB // CHUNK)]
    torch.cuda.synchronize()
    print(f"holding {len(held) * CHUNK}", flush=True)
    time.sleep(120)


def case_train():
    torch.manual_seed(0)
    x = torch.randn(4 << 20, device="cuda")
    y = 3 * x + 1
    w = torch.zeros(1, device="cuda", requires_grad=True)
    b = torch.zeros(1, device="cuda", requires_grad=True)
    for step in range(20):
        loss = ((w * x + b - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
            w.grad.zero_()
            b.grad.zero_()
    torch.cuda.synchronize()
    print(f"peak_reserved={torch.cuda.max_memory_reserved()} loss={float(loss):.3f}", flush=True)


def case_job(n_mib):
    held = [torch.empty(16 * MiB, dtype=torch.uint8, device="cuda") for _ in range(int(n_mib) // 16)]
    del held[len(held) // 2:]
    torch.cuda.synchronize()
    print(f"job done holding {len(held) * 16 * MiB} reserved={torch.cuda.memory_reserved()}", flush=True)


def case_exit_now():
    held = [torch.empty(16 * MiB, dtype=torch.uint8, device="cuda") for _ in range(6)]
    del held[:4]
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    st = torch.cuda.memory_stats()
    print(f"device_allocs={st['num_device_alloc']} device_frees={st['num_device_free']}", flush=True)
    os._exit(0)


CASES = {"exit_now": case_exit_now, "oom": case_oom, "fraction": case_fraction, "empty_cache": case_empty_cache, "props": case_props,
         "fill": case_fill, "hold": case_hold, "train": case_train, "job": case_job}

if __name__ == "__main__":
    CASES[sys.argv[1]](*sys.argv[2:])
    common.done()
