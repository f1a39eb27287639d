# SPDX-License-Identifier: Apache-2.0
"""jax_checks.py CASE: JAX (XLA's CUDA client) under gpucap's budget, run by checks.sh. Cases:
  prealloc  XLA preallocates a fraction (XLA_PYTHON_CLIENT_MEM_FRACTION, default 0.75) of the total
            that cuMemGetInfo reports: its bytes_limit must be that fraction of the budget, not of
            the card
  jit       jitted functions compile (XLA's GEMMs through cuBLAS, its fusions as cubins the driver
            loads) and run: a matmul chain of several sizes and types and three jitted gradient
            steps of a small MLP, the card within the budget all along
  platform  XLA_PYTHON_CLIENT_ALLOCATOR=platform (checks.sh sets it: no pool, every buffer from the
            driver): arrays until RESOURCE_EXHAUSTED at the budget, and as many again once freed
            (each OOM of XLA's costs 10 s: its allocator waits that long for memory before failing)
On the fake driver (no /dev/nvidia* device files) JAX's probe for an NVIDIA device is answered yes."""
import os
import sys

import common
from common import Failure, MiB, budget, mib, reserve, verdict

if common.on_fake():
    import jax._src.hardware_utils as hardware_utils

    hardware_utils.has_visible_nvidia_gpu = lambda: True
    # The fake cannot load cuPTI (the profiler needs a real driver); its version check is skipped.
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    # Kernels do not run on the fake, so XLA's autotuning (timing candidate kernels) measures
    # nothing and only costs seconds per compile: off here; a GPU run autotunes.
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_autotune_level=0").strip()

import jax


def case_prealloc():
    b = budget()
    fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
    d = jax.devices("cuda")[0]
    limit = (d.memory_stats() or {}).get("bytes_limit", 0)
    verdict(0 < limit <= fraction * b * 1.02 and limit >= fraction * b * 0.9, "jax.prealloc",
            f"XLA's bytes_limit is {mib(limit)} for a budget of {mib(b)} ({fraction} of it: {mib(fraction * b)})")


def start_record():
    """XLA started (its pool taken), and the fake card's peak counted from here."""
    jax.devices("cuda")[0].memory_stats()
    jax.numpy.zeros(1).block_until_ready()
    common.fake_reset_peak()


def case_jit():
    import jax.numpy as jnp

    b = budget()
    start_record()
    err, ran = None, []
    try:
        chain = jax.jit(lambda a, w: jnp.tanh(jnp.tanh(a @ w) @ w.T).sum(axis=0))
        for n, dt in ((1, jnp.float32), (128, jnp.float32), (2048, jnp.float32), (128, jnp.bfloat16)):
            out = chain(jnp.ones((n, 256), dt), jnp.ones((256, 512), dt)).block_until_ready()
            assert out.shape == (256,), out.shape
            ran.append(n)

        def loss(params, x, y):
            h = jax.nn.relu(x @ params["w1"] + params["b1"])
            return jnp.mean((h @ params["w2"] - y) ** 2)

        params = {"w1": jnp.ones((64, 256)), "b1": jnp.zeros(256), "w2": jnp.ones((256, 8))}
        step = jax.jit(lambda p, x, y: jax.tree_util.tree_map(lambda q, g: q - 0.01 * g, p, jax.grad(loss)(p, x, y)))
        for _ in range(3):
            params = step(params, jnp.ones((32, 64)), jnp.zeros((32, 8)))
        jax.block_until_ready(params)
    except Exception as e:
        err = Failure(e)
    peak = common.fake_peak()
    verdict(err is None and (peak is None or peak <= b), "jax.jit.run",
            f"a jitted matmul chain at {len(ran)} sizes and types, 3 jitted gradient steps; the card held at most "
            f"{mib(peak) if peak is not None else '?'} of {mib(b)}" + (f": {err.kind.__name__}: {err.text[:300]}" if err else ""))


def fill(chunk, most=10000):
    import jax.numpy as jnp

    held, err = [], None
    try:
        while len(held) < most:
            held.append(jnp.zeros((chunk // 4,), jnp.float32).block_until_ready())
    except Exception as e:
        err = Failure(e)
    return held, err


def case_platform():
    import gc

    b, chunk = budget(), 64 * MiB
    start_record()
    held, err = fill(chunk)
    first = len(held) * chunk
    peak = common.fake_peak()
    ok = err is not None and "RESOURCE_EXHAUSTED" in err.text and first <= b
    if peak is not None:
        # At the budget: what the card held and one more chunk would pass it.
        ok = ok and peak <= b and peak + chunk + reserve() > b
    verdict(ok, "jax.platform.budget", f"{len(held)} arrays of {mib(chunk)} ({mib(first)}) until "
            f"{err.text.splitlines()[0][:100] if err else 'no error'}; the card held at most "
            f"{mib(peak) if peak is not None else '?'} of {mib(b)}")
    del held, err
    gc.collect()
    again, err = fill(chunk, first // chunk)
    verdict(len(again) * chunk == first and err is None, "jax.platform.again",
            f"after freeing them, {len(again)} arrays of the {first // chunk} again" + (f": {err.text[:200]}" if err else ""))


if __name__ == "__main__":
    {"prealloc": case_prealloc, "jit": case_jit, "platform": case_platform}[sys.argv[1]]()
    common.done()
