"""Known-bad: returns the right values as a nested Python list (tolist()). Expected: not_a_tensor."""
import torch

BACKEND = "torch"
EXPECTED = "not_a_tensor"
DEVICE = "cpu"


def solve(a, b):
    return torch.matmul(a, b).tolist()
