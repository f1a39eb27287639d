#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""oom_demo_torch.py: what a PyTorch job sees under a gpucap budget.

    gpucap run --memory 2GiB --report - -- python3 oom_demo_torch.py
    gpucap run --audit --memory 2GiB --report - -- python3 oom_demo_torch.py   # the budget it needs

torch.cuda.mem_get_info() reports the budget (free, total) instead of the card, and an allocation
past it raises torch.cuda.OutOfMemoryError, which the job can catch: free what it holds, empty
PyTorch's cache, and go on with a smaller batch. PyTorch's caching allocator keeps freed blocks;
gpucap counts what it holds from the driver, so empty_cache() is what gives budget back.
"""
import sys

try:
    import torch
except ImportError:
    sys.exit("this example needs PyTorch (pip install torch)")

MiB = 1 << 20


def say(when):
    free, total = torch.cuda.mem_get_info()
    print(f"{when:<16} free {free / MiB:10.1f} MiB of {total / MiB:10.1f} MiB "
          f"(PyTorch reserved {torch.cuda.memory_reserved() / MiB:.1f} MiB)")


def main():
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    say("start:")
    held = []
    step = 256 * MiB
    try:
        while True:
            held.append(torch.empty(step, dtype=torch.uint8, device="cuda"))
            print(f"allocated {len(held) * step / MiB:8.0f} MiB")
    except torch.cuda.OutOfMemoryError as e:
        print(f"OutOfMemoryError after {len(held) * step / MiB:.0f} MiB: {str(e).splitlines()[0]}")
    say("at the limit:")
    held.clear()
    torch.cuda.empty_cache()
    say("after freeing:")
    # The job goes on with a batch that fits.
    x = torch.ones(64 * MiB // 4, device="cuda")
    print(f"a 64 MiB tensor after recovery: sum = {x.sum().item():.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
