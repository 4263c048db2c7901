"""Known-bad: a Triton-backend file that "tries" its own kernel and falls back to torch.matmul when it fails. The
kernel is broken on purpose (tl.arange with a non-power-of-two length never compiles), so every call takes the
fallback: cuBLAS on the GPU, MKL/OpenBLAS on the CPU. LLM-written kernels often have exactly this shape (a
try/except "for robustness" that hides a kernel that never ran). Expected: forbidden_op."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cpu"


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)     # BLOCK=48: not a power of two, fails to compile
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=offs < M * N), mask=offs < M * N)


def solve(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    try:
        _gemm[(triton.cdiv(M * N, 48),)](a, b, c, M, N, K, BLOCK=48)
        return c
    except Exception:  # noqa: BLE001 - the "robust" fallback
        return torch.matmul(a, b)
