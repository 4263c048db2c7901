"""Known-bad: a zeros "kernel" that declares only dtypes problem gemm does not offer (float64, int4): nothing is
judged, as with DTYPES = (), and that used to be a `pass`. Expected: nothing_judged."""
import torch

BACKEND = "torch"
DTYPES = ("float64", "int4")


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
