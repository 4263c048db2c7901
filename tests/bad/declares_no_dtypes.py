"""Known-bad: a zeros "kernel" that declares DTYPES = (): no dtype of the problem is judged, so no case ever runs.
It used to be recorded as `pass` (exit 0, a green test, a pass in a search loop) for a kernel that computes
nothing. A judgement that judged no dtype is now `nothing_judged` (verdict fail, exit 1). Expected: nothing_judged."""
import torch

BACKEND = "torch"
DTYPES = ()


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
