"""W8A8 linear layer, the specification: out = ((x @ w^T) * sx[:, None] * sw[None, :]) in bfloat16.

x (M, K) int8 activations with per-row (per-token) fp32 scales sx (M,); w (N, K) int8 weights (nn.Linear layout)
with per-output-channel fp32 scales sw (N,). The product x @ w^T is the exact integer sum (int32: |sum| <= K * 16384,
K bounded in problem.yaml), then dequantized and rounded once to bfloat16.

- reference(): what PyTorch users write, exact int32 product (float64 is exact for these integer sums, see
  problems/int8_gemm/reference.py), scales applied in fp32 (acc * sx * sw, left to right), rounded to bf16. Run on
  the native inputs it gives torch's own answer, whose error (one bf16 rounding plus ~3 fp32 roundings) sets the
  budget.
- oracle(): the same math with nothing rounded: the exact integer product times sx times sw in float64 (relative
  error ~2**-52, nothing next to bf16's 2**-8).
- error_scale(): zero. The only legitimate error is the final rounding, relative to each output value (the checker
  adds |oracle| itself), so every element is held to its own magnitude: rows scaled small are not swamped by rows
  scaled large, and an exact zero (a zero row, or a zero sum) must come back exactly zero.
"""
import torch

INT32_SAFE_K = (2**31 - 1) // (128 * 128)   # 131071


def _int8_rows(n, k, g, device):
    """(n, k) int8 rows of mixed kinds: full range incl. -128 (most rows), saturating all-127 / all--128 rows,
    sparse rows (~90% zeros, an all-zero row possible), small-magnitude rows in [-3, 3]."""
    x = torch.randint(-128, 128, (n, k), generator=g, device=device, dtype=torch.int16)
    kind = torch.randint(0, 10, (n, 1), generator=g, device=device)
    keep = torch.rand(n, k, generator=g, device=device) < 0.1
    small = torch.randint(-3, 4, (n, k), generator=g, device=device, dtype=torch.int16)
    x = torch.where(kind == 6, torch.full_like(x, 127), x)
    x = torch.where(kind == 7, torch.full_like(x, -128), x)
    x = torch.where(kind == 8, torch.where(keep, x, torch.zeros_like(x)), x)
    x = torch.where(kind == 9, small, x)
    return x.to(torch.int8).contiguous()


def _scales(n, lo, hi, g, device):
    """Positive fp32 scales 2**e * (1 + f), e uniform in [lo, hi], f uniform in [0, 1): per-row magnitudes spread
    over 2**(hi - lo) so a mixed-up row or column shows; about one in four is an exact power of two (f = 0)."""
    e = torch.randint(lo, hi + 1, (n,), generator=g, device=device).float()
    f = torch.rand(n, generator=g, device=device)
    f = torch.where(torch.rand(n, generator=g, device=device) < 0.25, torch.zeros_like(f), f)
    return (torch.exp2(e) * (1 + f)).to(torch.float32).contiguous()


def make_inputs(shape, dtype, seed, device):
    M, N, K = shape["M"], shape["N"], shape["K"]
    assert dtype == torch.int8, dtype
    assert K <= INT32_SAFE_K, f"K={K} could overflow the int32 product (K <= {INT32_SAFE_K})"
    g = torch.Generator(device=device).manual_seed(seed)
    x = _int8_rows(M, K, g, device)
    w = _int8_rows(N, K, g, device)
    # Magnitudes: activation scale amax/127 from 2**-12 up to 2**6 (LLMs have outlier tokens with activations in
    # the thousands), weight scale 2**-20..2**-5 (near-dead channels to large ones). Outputs then span 2**-32 ..
    # 2**29 at the extremes (|acc| <= K * 2**14, K <= 16384), typically 2**-20 .. 2**16: inside bf16's (and fp32's)
    # normal range, but past fp16's at both ends, so a kernel with an fp16 intermediate shows.
    sx = _scales(M, -12, 5, g, device)
    sw = _scales(N, -20, -6, g, device)
    return x, sx, w, sw


def _exact_int_mm(x, w):
    return (x.double() @ w.double().T).to(torch.int32)


def reference(x, sx, w, sw):
    acc = _exact_int_mm(x, w)                                   # exact int32
    return (acc.to(sx.dtype) * sx[:, None] * sw[None, :]).to(torch.bfloat16)


def rows(index, x, sx, w, sw):
    """The inputs whose reference is rows `index` (dim -2) of this call's: the judge checks a few sampled rows of
    every timed output against the oracle of just those rows (gauntlet.judge.values.sampled)."""
    return x[index], sx[index], w, sw


def factors(x, sx, w, sw):
    """(X, Y) in float64 with the oracle = X @ Y: the judge checks every timed output with a random projection,
    r^T C against (r^T X) Y (Freivalds; gauntlet.judge.values.sampled)."""
    return x.double() * sx.double()[:, None], (w.double() * sw.double()[:, None]).T


def oracle(x, sx, w, sw):
    return (x.double() @ w.double().T) * sx.double()[:, None] * sw.double()[None, :]


def error_scale(x, sx, w, sw):
    return torch.zeros((x.shape[0], w.shape[0]), dtype=torch.float64, device=x.device)


def negative_controls():
    """Wrong answers the checker must reject (tests/test_negative_controls.py, M=N=K=67), besides the generic ones
    (the generic lower_precision rounds the fp32 scales to bf16)."""
    def accumulate_in_bf16(x, sx, w, sw):      # int32 accumulator rounded to bf16 before the scales
        acc = _exact_int_mm(x, w).to(torch.bfloat16).to(torch.float32)
        return (acc * sx[:, None] * sw[None, :]).to(torch.bfloat16)

    def accumulate_in_fp16(x, sx, w, sw):      # the same through fp16: 11 bits, but overflows past 65504
        acc = _exact_int_mm(x, w).to(torch.float16).to(torch.float32)
        return (acc * sx[:, None] * sw[None, :]).to(torch.bfloat16)

    def ignore_scales(x, sx, w, sw):
        return _exact_int_mm(x, w).to(torch.bfloat16)

    def scales_swapped(x, sx, w, sw):          # row scale applied along columns and the other way round
        return (_exact_int_mm(x, w).float() * sx[None, :] * sw[:, None]).to(torch.bfloat16)

    def truncated_to_bf16(x, sx, w, sw):       # fp32 -> bf16 by dropping the low 16 bits (round toward zero)
        out = (_exact_int_mm(x, w).float() * sx[:, None] * sw[None, :]).contiguous()
        bits = out.view(torch.int32) & -65536                   # 0xFFFF0000
        return bits.view(torch.float32).to(torch.bfloat16)

    return {"accumulate_in_bf16": accumulate_in_bf16, "accumulate_in_fp16": accumulate_in_fp16,
            "ignore_scales": ignore_scales,
            "scales_swapped": scales_swapped, "truncated_to_bf16": truncated_to_bf16}
