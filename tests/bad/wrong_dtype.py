"""Known-bad: returns float32 for low-precision inputs (more accurate, but not the contract). Expected: wrong_dtype."""
import torch

BACKEND = "torch"


def solve(a, b):
    return torch.matmul(a.float(), b.float())
