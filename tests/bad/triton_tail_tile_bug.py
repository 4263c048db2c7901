"""Known-bad: a Triton GEMM whose grid rounds M and N down to whole tiles (M // BLOCK instead of cdiv), so the
tail rows and columns of C are never written. Right on multiples of 32, wrong elsewhere. Expected: mismatch."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def solve(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.zeros(M, N, device=a.device, dtype=a.dtype)
    grid = (max(1, M // 32), max(1, N // 32))   # the bug: floor instead of ceil
    _gemm[grid](a, b, c, M, N, K, BM=32, BN=32, BK=32)
    return c
