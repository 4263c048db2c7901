"""Known-bad: right everywhere except one element, nudged by 5% of the output's largest magnitude. The norm-wise
check barely moves on a large output; the element-wise check must catch it. Expected: mismatch."""
import torch

BACKEND = "torch"


def solve(a, b):
    c = torch.matmul(a, b)
    i, j = c.shape[0] // 2, c.shape[1] // 2
    c[i, j] += 0.05 * c.abs().max() + 1
    return c
