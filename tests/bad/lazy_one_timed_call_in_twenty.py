"""Known-bad (GPU, timing): honest in every call it can tell is not timed; inside the timing loop (it finds the
harness's timed-call loop on its own call stack) every 20th call skips the last quarter of K. A judge that fully
checks a few timed calls (two spots and one batch in 16) misses it most of the time: about 1 call in 20 of its 40
or more timed calls is wrong. Every timed call's output is now checked (a random projection and sampled rows,
gauntlet.judge.values.sampled): with 40 or more timed calls at 4096^3, at least two of the lazy calls are among
them, and each misses the projection by tens of its bound in nearly every column. Expected: mismatch."""
import sys

import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_count = [0]


def _timed() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "batch" and f.f_globals.get("__name__") == "gauntlet.child.timing":
            return True
        f = f.f_back
    return False


def solve(a, b):
    if not _timed():
        return torch.matmul(a, b)
    _count[0] += 1
    if _count[0] % 20:
        return torch.matmul(a, b)
    keep = a.shape[1] - a.shape[1] // 4
    return torch.matmul(a[:, :keep], b[:keep])
