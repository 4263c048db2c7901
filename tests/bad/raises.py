"""Known-bad: raises on some shapes (a kernel that never handled odd K). Expected: crash."""
import torch

BACKEND = "torch"


def solve(a, b):
    if a.shape[1] % 2:
        raise RuntimeError("odd K not supported")
    return torch.matmul(a, b)
