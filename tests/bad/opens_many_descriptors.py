"""Known-bad (issue 16): 10 000 open descriptors. The worker's RLIMIT_NOFILE (4096) refuses the rest: the
candidate's own call raises (EMFILE), a crash."""
import os

import torch

BACKEND = "torch"
_held = []


def solve(a, b):
    for _ in range(10_000):
        _held.append(os.open("/dev/null", os.O_RDONLY))
    return torch.matmul(a, b)
