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
  train         a real small training step, 5 times: Linear + ReLU + Linear, cross entropy, AdamW
                (cuBLAS GEMMs forward and backward); prints peak_reserved= (max_memory_reserved)
                and, on the fake driver, fake_peak= (the most the card held, by the fake's record)
  train_oom     training while the batch doubles until torch.OutOfMemoryError: that error, the
                budget as its "total capacity", the card never above the budget and the failed
                request past it, then training goes on at the last batch that fitted
  kernels       GEMMs of several sizes and types (matmul, bmm, addmm, einsum), conv2d forward and
                backward through cuDNN (benchmark mode off and on), printing tensors, and a GEMM
                whose output passes the budget: torch.OutOfMemoryError, the card within it
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
import torch.nn.functional as F

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


D_IN, HIDDEN, CLASSES = 1024, 4096, 16


def model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(D_IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES)).cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_step(model, opt, batch):
    x = torch.randn(batch, D_IN, device="cuda")
    y = torch.randint(0, CLASSES, (batch,), device="cuda")
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def start_record():
    """CUDA started, and the fake card's peak counted from here (the record outlives runs)."""
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    common.fake_reset_peak()


def case_train():
    start_record()
    model, opt = model_and_optimizer()
    err = None
    try:
        for _ in range(5):
            loss = train_step(model, opt, 256)
        torch.cuda.synchronize()
    except Exception as e:  # a GEMM refused (CUBLAS_STATUS_*) is the failure this case exists for
        err = Failure(e)
    verdict(err is None, "torch.train.step", "5 AdamW steps of Linear(1024, 4096) + ReLU + Linear(4096, 16) with cross "
            f"entropy, batch 256" + (f": {err.kind.__name__}: {err.text[:200]}" if err else ""))
    fake = common.fake_peak()
    print(f"peak_reserved={torch.cuda.max_memory_reserved()} fake_peak={'' if fake is None else fake}", flush=True)


def tried_in(msg):
    """The request a PyTorch OOM message says failed, in bytes, or None."""
    m = re.search(r"Tried to allocate ([\d.]+) (GiB|MiB|KiB|bytes)", msg)
    if not m:
        return None
    return float(m.group(1)) * {"GiB": 1 << 30, "MiB": MiB, "KiB": 1024, "bytes": 1}[m.group(2)]


def case_train_oom():
    b = budget()
    start_record()
    model, opt = model_and_optimizer()
    batch, fitted, err = 256, None, None
    while batch <= 1 << 24 and err is None:
        try:
            train_step(model, opt, batch)
            torch.cuda.synchronize()
            fitted, batch = batch, batch * 2
        except Exception as e:
            err = Failure(e)
    verdict(err is not None and err.kind is torch.OutOfMemoryError and fitted is not None, "torch.train_oom.error",
            f"training stopped by {(err.kind.__name__ if err else None)} at a batch of {batch} (the last that fitted: {fitted})")
    cap = capacity_in(err.text) if err else None
    verdict(cap is not None and abs(cap - b) <= 0.01 * b, "torch.train_oom.capacity",
            f"the message's total capacity is {cap and mib(cap)} for a budget of {mib(b)}")
    tried = (tried_in(err.text) if err else None) or 0
    fake = common.fake_peak()
    if fake is not None:
        # The request was denied because the card's use and it would pass the budget (its segment is
        # the request rounded up to 2 MiB): at the budget, not before it, and never above it.
        verdict(fake <= b and fake + reserve() + tried + 2 * MiB > b, "torch.train_oom.budget",
                f"the card held at most {mib(fake)} of {mib(b)}; the request that failed, {mib(tried)}, would have passed it")
    else:
        peak = torch.cuda.max_memory_reserved() + reserve()
        verdict(peak <= b, "torch.train_oom.budget", f"the allocator held at most {mib(peak)} of {mib(b)} with the reserve")
    del err
    torch.cuda.empty_cache()
    again = None
    try:
        train_step(model, opt, fitted or 256)
        torch.cuda.synchronize()
    except Exception as e:
        again = Failure(e)
    verdict(again is None, "torch.train_oom.recovers", f"after the OOM a step at batch {fitted} ran" +
            (f": {again.kind.__name__}: {again.text[:200]}" if again else ""))


def case_kernels():
    b = budget()
    start_record()
    # GEMMs: cuBLAS and cuBLASLt pick kernels per shape, type and card.
    dtypes = [torch.float32, torch.float16, torch.float64]
    if torch.cuda.is_bf16_supported(including_emulation=False):
        dtypes.append(torch.bfloat16)
    shapes = ((1, 1, 1), (7, 5, 3), (64, 64, 64), (257, 129, 65), (1024, 1024, 1024), (2048, 512, 4096))
    ran, err = 0, None
    try:
        for n, m, k in shapes:
            for dt in dtypes:
                a = torch.randn(n, k, device="cuda", dtype=dt)
                w = torch.randn(k, m, device="cuda", dtype=dt)
                outs = [a @ w, torch.bmm(a.expand(4, n, k), w.expand(4, k, m)),
                        torch.addmm(torch.zeros(m, device="cuda", dtype=dt), a, w),
                        F.linear(a, w.t(), torch.ones(m, device="cuda", dtype=dt)), torch.einsum("nk,km->nm", a, w)]
                assert all(o.shape[-2:] == (n, m) for o in outs), [o.shape for o in outs]
                ran += len(outs)
        torch.cuda.synchronize()
    except Exception as e:
        err = Failure(e)
    verdict(err is None, "torch.kernels.gemm", f"{ran} GEMMs (matmul, bmm, addmm, linear, einsum; "
            f"{', '.join(str(d).split('.')[1] for d in dtypes)}; sizes 1 to 4096)" +
            (f": {err.kind.__name__}: {err.text[:200]}" if err else ""))
    # Convolutions through cuDNN, its algorithm search (benchmark mode) included.
    err, convs = None, 0
    try:
        for bench in (False, True):
            torch.backends.cudnn.benchmark = bench
            for dt in (torch.float32, torch.float16):
                for ks, stride in ((1, 1), (3, 1), (5, 2)):
                    conv = torch.nn.Conv2d(3, 16, ks, stride=stride, padding=ks // 2).to("cuda", dt)
                    x = torch.randn(4, 3, 32, 32, device="cuda", dtype=dt, requires_grad=True)
                    conv(x).float().sum().backward()
                    convs += 1
        torch.cuda.synchronize()
    except Exception as e:
        err = Failure(e)
    verdict(err is None and torch.backends.cudnn.is_available(), "torch.kernels.conv",
            f"{convs} conv2d forward and backward through cuDNN {torch.backends.cudnn.version()}" +
            (f": {err.kind.__name__}: {err.text[:200]}" if err else ""))
    # Printing a tensor copies it to the host (the fake's copies read zeros).
    err, text = None, ""
    try:
        text = str(torch.zeros(3, device="cuda")) + "\n" + repr(torch.arange(6.0, device="cuda").reshape(2, 3).half())
    except Exception as e:
        err = Failure(e)
    want = "tensor([0., 0., 0.], device='cuda:0')"
    verdict(err is None and text.startswith(want if common.on_fake() else "tensor([0., 0., 0.]") and "cuda:0" in text,
            "torch.kernels.print", repr(text) if err is None else f"{err.kind.__name__}: {err.text[:200]}")
    # A GEMM whose output passes the budget: the OOM is PyTorch's, the card stays within the budget.
    n = int((0.4 * (b - reserve()) / 4) ** 0.5)  # each n x n float32 matrix 40% of what the budget leaves
    a = torch.empty(n, n, device="cuda")
    held, err = [], None
    try:
        for _ in range(4):
            held.append(a @ a)
    except Exception as e:
        err = Failure(e)
    fake = common.fake_peak()
    peak = fake if fake is not None else torch.cuda.max_memory_reserved() + reserve()
    tried = (tried_in(err.text) if err else None) or 0
    at_budget = fake is None or fake + reserve() + tried + 2 * MiB > b
    verdict(err is not None and err.kind is torch.OutOfMemoryError and peak <= b and at_budget,
            "torch.kernels.oom", f"{n}x{n} GEMMs: {(err.kind.__name__ if err else None)} after {len(held)} (asking "
            f"{mib(tried)}), the card {'held' if fake is not None else 'allocator reserved'} at most {mib(peak)} of {mib(b)}")


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


CASES = {"train_oom": case_train_oom, "kernels": case_kernels, "exit_now": case_exit_now, "oom": case_oom, "fraction": case_fraction, "empty_cache": case_empty_cache, "props": case_props,
         "fill": case_fill, "hold": case_hold, "train": case_train, "job": case_job}

if __name__ == "__main__":
    CASES[sys.argv[1]](*sys.argv[2:])
    common.done()
