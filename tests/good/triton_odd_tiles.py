"""Known-good, unusual: a Triton GEMM with lopsided tiles (BLOCK_M=16, BLOCK_N=64, BLOCK_K=128: a tall-skinny K
step and the smallest M tile tl.dot allows), a plain row-major program order, masks on every load and the store,
and fp32 accumulation (ieee for float32, so no TF32). Nothing a good kernel would pick, but correct on every shape,
tails included. Expected: pass."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "pass"
DEVICE = "cpu"
DTYPES = ("float16",)

BM, BN, BK = 16, 64, 128


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b, input_precision=PREC)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def solve(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    if K == 0:
        return c.zero_()
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _gemm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                BM=BM, BN=BN, BK=BK, PREC="ieee")
    return c
