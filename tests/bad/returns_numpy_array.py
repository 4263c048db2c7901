"""Known-bad: returns a numpy ndarray holding the right values (an easy slip when a kernel was prototyped in numpy,
and a way to dodge checks that call tensor methods). The contract is a plain torch.Tensor. Expected: not_a_tensor."""
import torch

BACKEND = "torch"
EXPECTED = "not_a_tensor"
DEVICE = "cpu"


def solve(a, b):
    return torch.matmul(a, b).cpu().float().numpy()
