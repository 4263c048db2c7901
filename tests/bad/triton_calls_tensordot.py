"""Known-bad: a Triton-backend file that computes with torch.tensordot(a, b, dims=1) (reshapes then aten.mm).
Expected: forbidden_op."""
import torch
import triton  # noqa: F401 - declared backend, never used

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cpu"


def solve(a, b):
    return torch.tensordot(a, b, dims=1)
