"""Known-good for problem fp8_gemm_rowwise, written the way public Triton kernels are (FBGEMM's row-wise fp8
quantization, vLLM's per-token quant): amax per row, scale = amax / 448, `tl.clamp(x / scale, -448, 448)` and a
plain `.to(tl.float8e4nv)`, under @triton.autotune; then an fp8 x fp8 tl.dot GEMM with fp32 accumulation and both
scales in the epilogue, bfloat16 out. No workaround for Triton's CPU interpreter (compare
solutions/fp8_gemm_rowwise/triton_rowwise.py's `_round_e4m3`): the harness makes the interpreter's fp8 cast round
as the GPU's `cvt.rn.satfinite` does and lets the autotuner run one config, so this gets the GPU's verdict, pass,
on the CPU too. Divisions use tl.math.div_rn, as the problem's quantization rule requires (plain `/` is div.full
on NVIDIA GPUs, up to 2 ulp off). max_num_imprecise_acc=BLOCK_K promotes Hopper's reduced-precision fp8
accumulation to fp32 every K tile.

Not in the gemm corpus (no EXPECTED hint: test_corpus_extra judges those on gemm);
tests/test_interpreter_fidelity.py judges it on fp8_gemm_rowwise and expects a pass."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
PROBLEM = "fp8_gemm_rowwise"

FP8_MAX = 448.0
BM, BN, BK = 64, 64, 128


@triton.autotune(configs=[triton.Config({"BLOCK_K": 512}, num_warps=4),
                          triton.Config({"BLOCK_K": 2048}, num_warps=8)], key=["K"])
@triton.jit
def _quantize_rows(x_ptr, q_ptr, s_ptr, K, stride_x, stride_q, BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    amax = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < K, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    amax_row = tl.max(amax, axis=0)
    scale = tl.where(amax_row > 0, tl.math.div_rn(amax_row, FP8_MAX), 1.0)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < K, other=0.0).to(tl.float32)
        q = tl.clamp(tl.math.div_rn(x, scale), -FP8_MAX, FP8_MAX).to(tl.float8e4nv)
        tl.store(q_ptr + row * stride_q + cols, q, mask=cols < K)
    tl.store(s_ptr + row, scale)


@triton.jit
def _fp8_matmul(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K, stride_a, stride_b, stride_c,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_a + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + rn[None, :] * stride_b + kk[:, None], mask=(rn[None, :] < N) & (kk[:, None] < K),
                    other=0.0)
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
    sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)
    sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
    c = acc * sa[:, None] * sb[None, :]
    tl.store(c_ptr + rm[:, None] * stride_c + rn[None, :], c.to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _quantize(t):
    R, K = t.shape
    q = torch.empty((R, K), dtype=torch.float8_e4m3fn, device=t.device)
    s = torch.empty((R,), dtype=torch.float32, device=t.device)
    _quantize_rows[(R,)](t, q, s, K, t.stride(0), q.stride(0))
    return q, s


def solve(x, w):
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    xq, sx = _quantize(x.contiguous())
    wq, sw = _quantize(w.contiguous())
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    _fp8_matmul[grid](xq, wq, sx, sw, out, M, N, K, xq.stride(0), wq.stride(0), out.stride(0),
                      BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)
    return out
