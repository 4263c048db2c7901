"""Known-bad: returns zeros (KernelBench accepted all-zero outputs on 4 of 60 level-1 problems). Expected: mismatch."""
import torch

BACKEND = "torch"


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
