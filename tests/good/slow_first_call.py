"""Known-good, unusual: spends 2 s on its first call (standing in for JIT compilation or autotuning the first time
a kernel is used) and is quick afterwards. Slowness is not a cheat: correctness calls have a generous wall-clock
limit, and on the GPU the timer warms every side up before it measures. Expected: pass."""
import time

import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cpu"

_warm = False


def solve(a, b):
    global _warm
    if not _warm:
        time.sleep(2.0)
        _warm = True
    return torch.matmul(a, b)
