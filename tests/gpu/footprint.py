# SPDX-License-Identifier: Apache-2.0
# tests/gpu/footprint.py FRAMEWORK: what a framework's CUDA context really holds on this card, stage by
# stage, read from NVML's per-process figure (run WITHOUT libgpucap.so preloaded). Prints one line per
# stage, "footprint FRAMEWORK STAGE own=<MiB> alloc=<MiB the framework allocated> ctx=<own - alloc>",
# the figures behind the context reserve per card class (charge/context.c). Bounded: a few seconds.
import os
import sys

import pynvml

pynvml.nvmlInit()
uuid = os.environ.get("CUDA_VISIBLE_DEVICES", "")
h = pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid.startswith("GPU-") else pynvml.nvmlDeviceGetHandleByIndex(0)


def own_mib():
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
        if p.pid == os.getpid():
            return (p.usedGpuMemory or 0) >> 20
    return -1


def say(fw, stage, alloc_bytes):
    own = own_mib()
    a = alloc_bytes >> 20
    print(f"footprint {fw} {stage} own={own} alloc={a} ctx={own - a if own >= 0 else '?'}", flush=True)


fw = sys.argv[1]
if fw == "torch":
    import torch

    torch.cuda.init()
    x = torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    say(fw, "init", torch.cuda.memory_reserved())
    a = torch.ones((2048, 2048), device="cuda")
    (a @ a).sum().item()
    say(fw, "matmul32", torch.cuda.memory_reserved())
    b = a.half()
    (b @ b).sum().item()
    say(fw, "matmul16", torch.cuda.memory_reserved())
    conv = torch.nn.Conv2d(16, 32, 3).cuda()
    y = conv(torch.randn(8, 16, 64, 64, device="cuda"))
    y.sum().backward()
    torch.cuda.synchronize()
    say(fw, "conv+backward", torch.cuda.memory_reserved())
    m = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
    opt = torch.optim.AdamW(m.parameters())
    for _ in range(3):
        loss = torch.nn.functional.cross_entropy(m(torch.randn(64, 1024, device="cuda")),
                                                 torch.randint(0, 10, (64,), device="cuda"))
        loss.backward(); opt.step(); opt.zero_grad()
    torch.cuda.synchronize()
    say(fw, "train", torch.cuda.memory_reserved())
elif fw == "cupy":
    import cupy

    x = cupy.empty(1)
    cupy.cuda.Device().synchronize()
    pool = cupy.get_default_memory_pool()
    say(fw, "init", pool.total_bytes())
    a = cupy.ones((2048, 2048), dtype=cupy.float32)
    float((a @ a).sum())
    say(fw, "matmul32", pool.total_bytes())
elif fw == "jax":
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    import jax
    import jax.numpy as jnp

    d = jax.devices()[0]
    x = jnp.ones((1,)); x.block_until_ready()
    st = lambda: (d.memory_stats() or {}).get("bytes_reserved", 0) or (d.memory_stats() or {}).get("pool_bytes", 0)
    say(fw, "init", st())
    a = jnp.ones((2048, 2048)); (a @ a).sum().block_until_ready()
    say(fw, "matmul32", st())
