"""Known-bad: uses input A as scratch after computing the answer (an in-place write into an input).
Expected: input_mutated."""
import torch

BACKEND = "torch"


def solve(a, b):
    c = torch.matmul(a, b)
    a.mul_(0.5)
    return c
