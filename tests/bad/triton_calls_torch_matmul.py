"""Known-bad: declares the Triton backend but computes with torch.matmul (cuBLAS on the GPU), with a decoy Triton
kernel that is never launched. Expected: forbidden_op."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"


@triton.jit
def _decoy(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def solve(a, b):
    return torch.matmul(a, b)
