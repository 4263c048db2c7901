"""Known-bad (GPU): a Triton-backend file that computes the GEMM with torch elementwise ops: (a[:, :, None] *
b[None]).sum(1), chunked over K to bound memory. No aten GEMM op runs, so the forbidden-op list does not fire; the
Triton kernel in the file is never launched. The planned profiler check ("a non-torch backend must launch kernels
of its own"; torch's elementwise/reduction kernels are not the candidate's) catches it on the GPU. On the CPU it
passes today (no check that a Triton-backend solve launched any Triton kernel). Expected: forbidden_op."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cuda"
DTYPES = ("float32",)


@triton.jit
def _unused(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def solve(a, b):
    M, K = a.shape
    N = b.shape[1]
    acc = torch.zeros(M, N, dtype=torch.float32, device=a.device)
    step = max(1, (1 << 26) // max(1, M * N))
    for k0 in range(0, K, step):
        acc += (a[:, k0:k0 + step, None].float() * b[None, k0:k0 + step, :].float()).sum(1)
    return acc.to(a.dtype)
