"""Known-bad: a Triton-backend file that computes with torch.einsum("mk,kn->mn") (which lowers to aten.mm/bmm, a
cuBLAS call on the GPU). Expected: forbidden_op."""
import torch
import triton  # noqa: F401 - declared backend, never used

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cpu"


def solve(a, b):
    return torch.einsum("mk,kn->mn", a, b)
