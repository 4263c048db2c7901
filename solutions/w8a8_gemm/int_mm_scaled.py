"""The baseline: what people write for a W8A8 linear in PyTorch. torch._int_mm (cuBLASLt int8 IMMA) for the exact
int32 product, then the per-token and per-channel scales as fp32 elementwise ops, then the cast to bfloat16.

The product runs in _int_mm's fastest layout, b = w.t() (a free column-major view of the (N, K) weight: TN, both
operands K-major); a row-major (K, N) b falls back to slow kernels (127 vs 939 TOPS in our measurements,
problems/int8_gemm/problem.yaml has the evidence). Outside _int_mm's CUDA shape limits (M > 16, K and N positive
multiples of 8) the operands are zero-padded, which is exact, and the result sliced; decode at M = 16 pays one small
pad of x, as any user of _int_mm at that size would.

CPU: _int_mm's oneDNN path is wrong on full-range int8 on a CPU without AVX512-VNNI (saturating int16 pair sums;
seen with ONEDNN_MAX_CPU_ISA=AVX2, torch 2.13), so on the CPU the same padding runs around an exact float64
stand-in that enforces the CUDA limits (see solutions/int8_gemm/int_mm.py).
"""
import torch
import torch.nn.functional as F

BACKEND = "torch"

_MIN_M, _PAD_M, _MULT = 17, 32, 8


def _round_up(x, m):
    return (x + m - 1) // m * m


def _cpu_int_mm(a, b):
    M, K = a.shape
    N = b.shape[1]
    if not (M >= _MIN_M and K > 0 and K % _MULT == 0 and N > 0 and N % _MULT == 0):
        raise RuntimeError(f"_int_mm limits violated: M={M}, K={K}, N={N}")
    return (a.double() @ b.double()).to(torch.int32)


def _padded_shape(M, N, K):
    return (M if M >= _MIN_M else _PAD_M), _round_up(N, _MULT), _round_up(K, _MULT)


def _int_mm_any_shape(x, w):
    M, K = x.shape
    N = w.shape[0]
    Mp, Np, Kp = _padded_shape(M, N, K)
    if (Mp, Kp) != (M, K):
        x = F.pad(x, (0, Kp - K, 0, Mp - M))
    if (Np, Kp) != (N, K):
        w = F.pad(w, (0, Kp - K, 0, Np - N))
    mm = torch._int_mm if x.is_cuda else _cpu_int_mm
    acc = mm(x.contiguous(), w.contiguous().t())
    if (Mp, Np) != (M, N):
        acc = acc[:M, :N]
    return acc


def solve(x, sx, w, sw):
    acc = _int_mm_any_shape(x, w)
    return (acc * sx[:, None] * sw[None, :]).to(torch.bfloat16)


def describe(x, sx, w, sw):
    M, K = x.shape
    N = w.shape[0]
    Mp, Np, Kp = _padded_shape(M, N, K)
    where = "torch._int_mm (cuBLASLt), TN layout (b = w.t() view), fp32 scales in torch" if x.is_cuda else \
        "exact float64 stand-in for _int_mm on the CPU, fp32 scales in torch"
    pad = "" if (Mp, Np, Kp) == (M, N, K) else f"; zero-padded (M, N, K) {M, N, K} -> {Mp, Np, Kp}"
    return where + pad
