"""Known-bad: returns C^T as a contiguous (N, M) tensor. Expected: wrong_shape (when M != N)."""
import torch

BACKEND = "torch"


def solve(a, b):
    return torch.matmul(b.t(), a.t()).contiguous()
