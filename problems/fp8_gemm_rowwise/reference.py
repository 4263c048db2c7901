"""FP8 GEMM with row-wise scaling, the specification: out = x @ w.T with x (M, K) and w (N, K) in bfloat16, where
the kernel quantizes both operands to float8_e4m3fn itself: one fp32 scale per row of x (per token) and one per row
of w (per output channel), multiplies in fp8 with fp32 accumulation, applies both scales, and writes bfloat16 (M, N).

The quantization recipe, per row r of x and of w (what every admitted kernel computes):
  amax  = max_k |t[r, k]|                        over the whole row r, in fp32 (exact)
  q     = e4m3fn( clamp(t * 448 / amax, -448, 448) )   the clamp saturates; the cast to e4m3fn rounds to nearest
                                                 even (subnormals included)
  dequantized value = q * scale, scale = amax / 448, an fp32 value
  an all-zero row (amax == 0): q = 0, so its output is 0 whatever scale a kernel keeps for it.
t * 448 / amax is computed in fp32, and there are several common ways of doing it. The judge admits each of these
conventions (CONVENTIONS; one per call: the whole output is judged against one of them, both operands quantized
the same way), each a sequence of correctly rounded IEEE fp32 operations and therefore exact bit for bit:
  divide               scale = amax / 448 (fp32 division); q from t / scale; dequantize by scale. The stated rule:
                       reference(), oracle() and error_scale() use it unless told another convention.
  reciprocal           scale as above; q from t * (1 / scale), the reciprocal correctly rounded (vLLM's fp8 quant
                       kernels: inverted_scale = 1.0f / scale); dequantize by scale.
  inverse_scale        inv = 448 / amax (one fp32 division); q from t * inv; dequantize by 1 / inv (torchao's float8:
                       amax_to_scale, then torch._scaled_mm with scale.reciprocal()).
  inverse_scale_torch  inv = (1 / amax) * 448, two roundings, which is what torch computes for `448.0 / amax`
                       (Tensor.__rdiv__ is reciprocal() * 448; DeepGEMM's per_token_cast_to_fp8); dequantize by
                       amax / 448.
They differ only where the fp32 value lands on an e4m3 rounding tie (about 1 quantized value in 1000 to 4000 of
make_inputs's data, by pair), and there one of them moves a product by a whole fp8 step, more than the budget
allows; which is why the judge needs the convention's own oracle rather than a wider budget. A dequantization scale
within a few fp32 ulps of the convention's (amax / 448 or 1 / inv, either way) is inside the budget: 2**-24 against
bf16's 2**-8. Not admitted, because they are other recipes or not one of these computations: an approximate division
(in Triton, plain `/` on fp32 compiles to div.full.f32, up to 2 ulp, on NVIDIA GPUs: use tl.math.div_rn, and
tl.math.div_rn(1.0, s) for a reciprocal; the CPU interpreter divides exactly, so a kernel using `/` can pass on the
CPU and fail on the GPU); in PyTorch on CUDA, `amax / 448.0` with a Python scalar (a multiply by the reciprocal of
448, a different scale: divide by a tensor); a floor on amax that changes a nonzero row's scale; one scale per
tensor, per-block scales, a scale rounded to bf16, e5m2, or no quantization at all.

The judge's oracle applies exactly this quantization (per convention) and then computes the dequantized product in
float64, so an honest kernel differs from its convention's oracle only by fp32 accumulation order and the bfloat16
output rounding, while a kernel that skips quantization, uses one scale per tensor, or uses e5m2 is off by whole
fp8 rounding errors under every convention and fails.
"""
import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite float8_e4m3fn

# The admitted ways of computing the quantized values (the module docstring); the first is the stated rule and the
# default of reference(), oracle() and error_scale(). The judge (harness/judge/values/conventions.py) accepts an output
# that is within budget of any one convention's oracle.
CONVENTIONS = ("divide", "reciprocal", "inverse_scale", "inverse_scale_torch")


def to_fp8_range(t32, amax, convention="divide"):
    """(v, scale): fp32 t mapped onto e4m3's range by `convention` (before the clamp and the cast) and the scale its
    quantized values are dequantized by; amax broadcasts against t32. Tensor operands throughout, on purpose: on
    CUDA, `tensor / python_scalar` is a multiplication by the scalar's reciprocal, not the IEEE quotient."""
    nonzero = amax > 0
    one, fmax = torch.ones_like(amax), torch.full_like(amax, FP8_MAX)
    if convention in ("divide", "reciprocal"):
        scale = torch.where(nonzero, amax / fmax, one)
        return (t32 / scale if convention == "divide" else t32 * (one / scale)), scale
    if convention == "inverse_scale":
        inv = torch.where(nonzero, fmax / amax, one)
        return t32 * inv, one / inv
    if convention == "inverse_scale_torch":
        inv = torch.where(nonzero, (one / amax) * fmax, one)
        return t32 * inv, torch.where(nonzero, amax / fmax, one)
    raise ValueError(f"unknown quantization convention {convention!r}; known: {', '.join(CONVENTIONS)}")


def quantize_rows(t, convention="divide"):
    """Row-wise e4m3 quantization of a 2-D tensor: (q float8_e4m3fn, scale float32 (rows, 1)). The recipe and the
    conventions are in the module docstring. Runs in float32 whatever the input dtype (bf16 and fp64-upcast bf16
    give the same bits)."""
    t32 = t.float()
    amax = t32.abs().amax(dim=1, keepdim=True)
    v, scale = to_fp8_range(t32, amax, convention)
    return v.clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def make_inputs(shape, dtype, seed, device):
    """x (M, K) and w (N, K) in `dtype` (bfloat16). Each operand has rows of very different scale (2**-6 .. 2**3,
    so one scale per tensor would push the small rows into fp8's subnormals), columns scaled by 2**-2 .. 2**2 (so a
    row is not uniform), outliers 50-100x the row's typical size in about half the rows (they set the amax, the
    real-model activation pattern the per-row scale exists for), and about 1 row in 16 all zero (the zero-amax
    rule)."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    g = torch.Generator(device=device).manual_seed(seed)

    def operand(rows):
        t = torch.randn(rows, K, generator=g, device=device, dtype=torch.float32)
        row_scale = torch.exp2(torch.randint(-6, 4, (rows, 1), generator=g, device=device).float())
        col_scale = torch.exp2(torch.randint(-2, 3, (1, K), generator=g, device=device).float())
        t = t * col_scale
        has_outliers = torch.rand(rows, 1, generator=g, device=device) < 0.5
        where = torch.rand(rows, K, generator=g, device=device) < 1 / 128
        size = 50 + 50 * torch.rand(rows, K, generator=g, device=device)
        sign = torch.where(torch.rand(rows, K, generator=g, device=device) < 0.5, -1.0, 1.0)
        t = torch.where(has_outliers & where, sign * size, t)
        t = t * row_scale
        zero = torch.rand(rows, 1, generator=g, device=device) < 1 / 16
        return t.masked_fill(zero, 0.0).to(dtype).contiguous()

    x = operand(M)
    w = operand(N)
    return x, w


def reference(x, w, convention="divide"):
    """Quantize both operands row-wise, multiply the fp8 values exactly with fp32 accumulation, scale, round."""
    xq, sx = quantize_rows(x, convention)
    wq, sw = quantize_rows(w, convention)
    acc = xq.float() @ wq.float().t()          # fp8 x fp8 products are exact in fp32; the sum rounds in fp32
    return (acc * sx * sw.t()).to(x.dtype)


def rows(index, x, w):
    """The inputs whose reference is rows `index` (dim -2) of this call's: the judge checks a few sampled rows of
    every timed output against the oracle of just those rows (gauntlet.judge.values.sampled)."""
    return x[index], w


def _dequantized64(x, w, convention):
    xq, sx = quantize_rows(x, convention)
    wq, sw = quantize_rows(w, convention)
    return xq.double() * sx.double(), wq.double() * sw.double()


def oracle(x, w, convention="divide"):
    """The reference's own quantization under `convention` (bit for bit), then the product of the dequantized
    values in float64."""
    xd, wd = _dequantized64(x, w, convention)
    return xd @ wd.t()


def error_scale(x, w, convention="divide"):
    """sqrt(sum_k (xd[m,k] * wd[n,k])**2) over the dequantized operands: the root-sum-square of the products summed
    into out[m, n], which fp32 accumulation error (random sign, adding in quadrature) scales with. Called on
    float64-upcast inputs; quantize_rows gives the same bits for them."""
    xd, wd = _dequantized64(x, w, convention)
    return ((xd * xd) @ (wd * wd).t()).sqrt()


def negative_controls():
    """Plausible wrong kernels the checker must reject."""

    def no_quantization(x, w):
        # a bf16 GEMM: right up to bf16, but not what the quantized model computes
        return (x.float() @ w.float().t()).to(x.dtype)

    def per_tensor_scale(x, w):
        # one scale for the whole tensor (amax over everything): small rows lose their precision
        def q(t):
            t32 = t.float()
            amax = t32.abs().amax()
            scale = torch.where(amax > 0, amax / torch.full_like(amax, FP8_MAX), torch.ones_like(amax))
            return (t32 / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).float() * scale
        return (q(x) @ q(w).t()).to(x.dtype)

    def e5m2_instead(x, w):
        # float8_e5m2 (2 mantissa bits, max 57344) with the same amax/448 rule
        def q(t):
            t32 = t.float()
            amax = t32.abs().amax(dim=1, keepdim=True)
            scale = torch.where(amax > 0, amax / torch.full_like(amax, FP8_MAX), torch.ones_like(amax))
            return (t32 / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e5m2).float() * scale
        return (q(x) @ q(w).t()).to(x.dtype)

    def _dequantized(t, amax_of, scale_dtype=torch.float32):
        # the divide rule with amax from amax_of and the scale stored in scale_dtype
        t32 = t.float()
        amax = amax_of(t32)
        scale = torch.where(amax > 0, amax / torch.full_like(amax, FP8_MAX), torch.ones_like(amax))
        scale = scale.to(scale_dtype).float()
        return (t32 / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).float() * scale

    def signed_amax(x, w):
        # amax = max(t) instead of max |t|: a row whose extreme value is negative saturates
        def q(t):
            return _dequantized(t, lambda t32: t32.amax(dim=1, keepdim=True).clamp_min(0))
        return (q(x) @ q(w).t()).to(x.dtype)

    def scale_in_bf16(x, w):
        # the scale rounded to bfloat16, quantizing and dequantizing by it: another fp8 grid in every row
        def q(t):
            return _dequantized(t, lambda t32: t32.abs().amax(dim=1, keepdim=True), torch.bfloat16)
        return (q(x) @ q(w).t()).to(x.dtype)

    return {"no_quantization": no_quantization, "per_tensor_scale": per_tensor_scale, "e5m2_instead": e5m2_instead,
            "signed_amax": signed_amax, "scale_in_bf16": scale_in_bf16}
