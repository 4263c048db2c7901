"""Known-bad (GPU): computes on the host and returns a CPU tensor for CUDA inputs (the values are right, but the
caller would pay a device round trip, and a timer on the GPU's stream sees no GPU work at all).
Expected: wrong_device."""
import torch

BACKEND = "torch"
EXPECTED = "wrong_device"
DEVICE = "cuda"
DTYPES = ("float32",)


def solve(a, b):
    return torch.matmul(a.cpu(), b.cpu())
