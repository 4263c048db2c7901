"""Known-bad: claims float32 but multiplies in bfloat16 (a 3x speed trick on tensor cores). Expected: mismatch."""
import torch

BACKEND = "torch"
DTYPES = ("float32",)


def solve(a, b):
    return torch.matmul(a.bfloat16(), b.bfloat16()).float()
