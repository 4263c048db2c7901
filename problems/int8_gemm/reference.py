"""int8 GEMM, the specification: C = A @ W^T, exactly, with A (M, K) int8, W (N, K) int8 and C (M, N) int32.

W is given as an (N, K) row-major tensor, the layout of an nn.Linear weight. Both operands are therefore K-major
("TN" in cuBLAS's column-major terms), which is the layout int8 tensor cores need (see problem.yaml for why).

Exactness. Every product a*w is an integer with |a*w| <= 128*128 = 16384, so every partial sum of a row of K
products is an integer with magnitude <= K * 16384. In float64 every such integer below 2**53 is representable and
every addition (or FMA) of them is exact, whatever order or blocking the BLAS uses, so `a.double() @ w.double().T`
is the exact integer result for K < 2**39. The result then fits int32 when K * 16384 < 2**31, i.e. K <= 131071
(two rows of -128 reach +K * 16384, the largest magnitude); problem.yaml keeps K far below that. torch has no
int32/int64 matmul on CUDA, so float64 is the exact route that runs on both devices.
"""
import torch

INT32_SAFE_K = (2**31 - 1) // (128 * 128)   # 131071: the largest K whose worst-case sum still fits int32


def _int8_rows(n, k, g, device):
    """(n, k) int8 rows of mixed kinds, so that row-indexing, sign and saturation bugs show:
    - full range [-128, 127] (most rows), -128 included;
    - saturating rows, all 127 or all -128 (with another such row they reach the extremes +-K*16384 of the sum);
    - sparse rows (about 90% zeros; an all-zero row is possible and must give exact zeros);
    - small-magnitude rows in [-3, 3] (a kernel that drops low bits or mis-scales shows)."""
    x = torch.randint(-128, 128, (n, k), generator=g, device=device, dtype=torch.int16)
    kind = torch.randint(0, 10, (n, 1), generator=g, device=device)
    keep = torch.rand(n, k, generator=g, device=device) < 0.1
    small = torch.randint(-3, 4, (n, k), generator=g, device=device, dtype=torch.int16)
    x = torch.where(kind == 6, torch.full_like(x, 127), x)
    x = torch.where(kind == 7, torch.full_like(x, -128), x)
    x = torch.where(kind == 8, torch.where(keep, x, torch.zeros_like(x)), x)
    x = torch.where(kind == 9, small, x)
    return x.to(torch.int8).contiguous()


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape["M"], shape["N"], shape["K"]
    assert dtype == torch.int8, dtype
    assert K <= INT32_SAFE_K, f"K={K} could overflow the int32 result (K <= {INT32_SAFE_K})"
    g = torch.Generator(device=device).manual_seed(seed)
    a = _int8_rows(M, K, g, device)
    w = _int8_rows(N, K, g, device)      # row n of W is column n of C
    return a, w


def reference(a, w):
    """C[m, n] = sum_k a[m, k] * w[n, k], exact (float64 is exact here, see the module docstring)."""
    return (a.double() @ w.double().T).to(torch.int32)


def rows(index, a, w):
    """The inputs whose reference is rows `index` (dim -2) of this call's: the judge checks a few sampled rows of
    every timed output against the oracle of just those rows (gauntlet.judge.values.sampled)."""
    return a[index], w


def factors(a, w):
    """(X, Y) in float64 with the oracle = X @ Y: the judge checks every timed output with a random projection,
    r^T C against (r^T X) Y (Freivalds; gauntlet.judge.values.sampled)."""
    return a.double(), w.double().T


def negative_controls():
    """Wrong answers the checker must reject (tests/test_negative_controls.py runs them at M=N=K=67).

    `lower_precision` replaces the generic control of that name: the generic one lowers only floating-point
    inputs, and this problem has none, so it would hand back the reference itself. Here it is the integer product
    rounded through bfloat16, what an int8 kernel accumulating (or storing) in a 16-bit float would return."""
    def lower_precision(a, w):
        return (a.float() @ w.float().T).to(torch.bfloat16).to(torch.int32)

    def int16_accumulator(a, w):      # an accumulator too narrow: wraps modulo 2**16
        return reference(a, w).to(torch.int16).to(torch.int32)

    def drop_k_tail(a, w):            # a kernel whose last, partial K tile is skipped (67 = 64 + 3)
        k = a.shape[1] - a.shape[1] % 32
        return reference(a[:, :k], w[:, :k])

    def weight_read_as_k_by_n(a, w):  # the (N, K) weight read as if it were a (K, N) row-major matrix
        n, k = w.shape
        return (a.double() @ w.reshape(k, n).double()).to(torch.int32)

    return {"lower_precision": lower_precision, "int16_accumulator": int16_accumulator,
            "drop_k_tail": drop_k_tail, "weight_read_as_k_by_n": weight_read_as_k_by_n}
