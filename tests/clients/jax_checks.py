# SPDX-License-Identifier: Apache-2.0
"""jax_checks.py prealloc: JAX (XLA's CUDA client) under gpucap's budget, run by checks.sh. XLA
preallocates a fraction (XLA_PYTHON_CLIENT_MEM_FRACTION, default 0.75) of the total that
cuMemGetInfo reports: its bytes_limit must be that fraction of the budget, not of the card.
On the fake driver (no /dev/nvidia* device files) JAX's probe for an NVIDIA device is answered yes."""
import os
import sys

import common
from common import budget, mib, verdict

if common.on_fake():
    import jax._src.hardware_utils as hardware_utils

    hardware_utils.has_visible_nvidia_gpu = lambda: True
    # The fake cannot load cuPTI (the profiler needs a real driver); its version check is skipped.
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")

import jax


def case_prealloc():
    b = budget()
    fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
    d = jax.devices("cuda")[0]
    limit = (d.memory_stats() or {}).get("bytes_limit", 0)
    verdict(0 < limit <= fraction * b * 1.02 and limit >= fraction * b * 0.9, "jax.prealloc",
            f"XLA's bytes_limit is {mib(limit)} for a budget of {mib(b)} ({fraction} of it: {mib(fraction * b)})")


if __name__ == "__main__":
    {"prealloc": case_prealloc}[sys.argv[1]]()
    common.done()
