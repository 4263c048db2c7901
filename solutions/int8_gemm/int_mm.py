"""The baseline: cuBLASLt int8 IMMA through torch._int_mm, in its fastest layout, correct on every shape.

Layout. torch._int_mm(a, b) computes a (M, K) @ b (K, N) -> int32. We pass b = w.t(), a free view of the (N, K)
row-major weight: column-major (K, N), so both operands are K-major ("TN" for cuBLAS). That is the layout int8
tensor cores need (4 int8 values along K per 32-bit register; Hopper's wgmma cannot transpose 8-bit operands), and
the one cuBLASLt has fast IMMA kernels for. A contiguous row-major (K, N) b instead falls back to kernels that
transpose on the fly: we measured 127 TOPS that way on an H200 against 939 TOPS in TN on an H100, and PyTorch issue
#187094 shows such fallbacks by name (problems/int8_gemm/problem.yaml has the details).

Shape limits. On CUDA, _int_mm_out_cuda (aten/src/ATen/native/cuda/Blas.cpp) refuses M <= 16 and K or N not a
positive multiple of 8. Outside them we zero-pad, which is exact: zero columns of K add nothing to any sum, and the
extra rows/columns of M/N are sliced off. M is padded to 32 (one small copy of A: decode at M = 16 pays it, as any
user of _int_mm at that size would), K and N up to the next multiple of 8 (a copy of W too; only off the benchmark
shapes, which are all multiples of 8).

CPU. The CPU path of torch._int_mm is not exact everywhere: it goes through oneDNN, and on a CPU without
AVX512-VNNI (forced here with ONEDNN_MAX_CPU_ISA=AVX2 or AVX512_CORE, torch 2.13) it returned 65280 instead of
8258048 for all-127 operands and was wrong on every element of full-range random int8 data, yet exact on values in
[-64, 64): the signature of the non-VNNI u8 x s8 kernels' saturating int16 pair sums (vpmaddubsw). So on the CPU this file
runs the same padding logic around an exact stand-in for _int_mm (float64 matmul, exact for these integer sums, see
problems/int8_gemm/reference.py) that enforces the CUDA shape limits, so CI exercises the padding that the GPU runs.
"""
import torch
import torch.nn.functional as F

BACKEND = "torch"

_MIN_M = 17            # _int_mm on CUDA: self.size(0) > 16
_PAD_M = 32            # what we pad a short A to
_MULT = 8              # _int_mm on CUDA: K and N positive multiples of 8


def _round_up(x, m):
    return (x + m - 1) // m * m


def _cpu_int_mm(a, b):
    """Exact int8 x int8 -> int32 on the CPU, with torch._int_mm's CUDA shape limits checked (see the docstring)."""
    M, K = a.shape
    N = b.shape[1]
    if not (M >= _MIN_M and K > 0 and K % _MULT == 0 and N > 0 and N % _MULT == 0):
        raise RuntimeError(f"_int_mm limits violated: M={M}, K={K}, N={N}")
    return (a.double() @ b.double()).to(torch.int32)


def _padded_shape(M, N, K):
    return (M if M >= _MIN_M else _PAD_M), _round_up(N, _MULT), _round_up(K, _MULT)


def int_mm_any_shape(a, w):
    """a (M, K) int8 @ w (N, K) int8 ^T -> (M, N) int32 via torch._int_mm in the TN layout, padding as needed."""
    M, K = a.shape
    N = w.shape[0]
    Mp, Np, Kp = _padded_shape(M, N, K)
    if (Mp, Kp) != (M, K):
        a = F.pad(a, (0, Kp - K, 0, Mp - M))
    if (Np, Kp) != (N, K):
        w = F.pad(w, (0, Kp - K, 0, Np - N))
    mm = torch._int_mm if a.is_cuda else _cpu_int_mm
    c = mm(a.contiguous(), w.contiguous().t())   # b = w.t(): column-major (K, N), the TN layout
    if (Mp, Np) != (M, N):
        c = c[:M, :N].contiguous()
    return c


def solve(a, w):
    return int_mm_any_shape(a, w)


def describe(a, w):
    M, K = a.shape
    N = w.shape[0]
    Mp, Np, Kp = _padded_shape(M, N, K)
    where = "torch._int_mm (cuBLASLt), TN layout (b = w.t() view)" if a.is_cuda else \
        "exact float64 stand-in for _int_mm on the CPU"
    pad = "" if (Mp, Np, Kp) == (M, N, K) else f"; zero-padded (M, N, K) {M, N, K} -> {Mp, Np, Kp}"
    return where + pad
