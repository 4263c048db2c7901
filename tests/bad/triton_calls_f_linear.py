"""Known-bad: a Triton-backend file that computes with torch.nn.functional.linear(a, b.T) (aten.linear -> addmm/mm,
cuBLAS on the GPU), dressed up as "using the linear layer's kernel". Expected: forbidden_op."""
import torch.nn.functional as F
import triton  # noqa: F401 - declared backend, never used

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cpu"


def solve(a, b):
    return F.linear(a, b.t())
