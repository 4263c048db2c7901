"""Known-bad: a Triton GEMM that never writes the last N % 16 columns of C when the output is large (M * N >= 8192),
the shape of a fast path that handles the 16-aligned bulk of a big output and leaves the tail to a cleanup launch
that was never written. Right on every small output and on every N that is a multiple of 16. Before the wide edge
case and the large-and-misaligned draws (harness/judge/values/fuzz.py), it passed every edge case of gemm's CPU domain
(the large outputs there were all aligned, or N was 1) and 4.2% of random draws reached it; now the edge case
M = N = 383, K = 9 reaches it in every judgement, and 9.9% of random draws. Expected: mismatch."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "mismatch"
DEVICE = "cpu"
DTYPES = ("float16",)


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, N_STORE, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
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
             mask=(rm[:, None] < M) & (rn[None, :] < N_STORE))


def solve(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.zeros(M, N, device=a.device, dtype=a.dtype)
    n_store = N - N % 16 if M * N >= 8192 else N     # the bug: the tail columns' cleanup is missing
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    _gemm[grid](a, b, c, M, N, K, n_store, BM=32, BN=32, BK=32)
    return c
