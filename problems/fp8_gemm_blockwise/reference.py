"""Block-scaled FP8 GEMM (the DeepSeek-V3 recipe), the specification: out = x @ w.T in bfloat16 (M, N), where
- the weight arrives already quantized, as real deployments store it: w_fp8 (N, K) float8_e4m3fn with one fp32
  scale per 128x128 block, w_scale (ceil(N/128), ceil(K/128)); its dequantized value is
  w_fp8[n, k] * w_scale[n // 128, k // 128];
- the activation x (M, K) arrives in bfloat16 and the kernel quantizes it itself, on the fly, in 1x128 blocks along
  K: one fp32 scale per row per 128-wide K block (the last block of a row is partial when K is not a multiple of
  128), x_scale (M, ceil(K/128));
- the product runs in fp8 with fp32 accumulation and the scales applied per K block, as DeepGEMM does:
  out[m, n] = sum_kb  x_scale[m, kb] * w_scale[n // 128, kb] * sum_{k in block kb} xq[m, k] * w_fp8[n, k].

The activation quantization recipe, for each row m and K block kb, over the block's real elements only:
  amax  = max |x[m, k]|                          in fp32 (exact)
  xq    = e4m3fn( clamp(x * 448 / amax, -448, 448) )   saturating clamp; the cast rounds to nearest even
                                                 (subnormals included)
  dequantized value = xq * x_scale, x_scale = amax / 448, an fp32 value
  an all-zero block (amax == 0): xq = 0, so it adds nothing whatever scale a kernel keeps for it.
x * 448 / amax is computed in fp32, and there are several common ways of doing it. The judge admits each of these
conventions (CONVENTIONS; one per call: the whole output is judged against one of them), each a sequence of
correctly rounded IEEE fp32 operations and therefore exact bit for bit:
  divide               x_scale = amax / 448 (fp32 division); xq from x / x_scale; dequantize by x_scale. The stated
                       rule: reference(), oracle() and error_scale() use it unless told another convention.
  reciprocal           x_scale as above; xq from x * (1 / x_scale), the reciprocal correctly rounded (vLLM's fp8
                       quant kernels: inverted_scale = 1.0f / scale); dequantize by x_scale.
  inverse_scale        inv = 448 / amax (one fp32 division); xq from x * inv; dequantize by 1 / inv (torchao's
                       float8: amax_to_scale, then torch._scaled_mm with scale.reciprocal()).
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
448, a different scale: divide by a tensor); a floor on amax that changes a nonzero block's scale (DeepGEMM's test
quantizer clamps amax at 1e-4); one activation scale per row or per tensor, other block sizes, a scale rounded to
bf16, e5m2, or no quantization at all. make_inputs quantizes the weight by the divide convention over 128x128 blocks
(the weight is an input: its quantization is not the kernel's).

The judge's oracle applies exactly this quantization (per convention) and computes the dequantized product in
float64, so an honest kernel differs from its convention's oracle only by fp32 accumulation and the bf16 output
rounding.
"""
import torch
import torch.nn.functional as F

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite float8_e4m3fn
BLOCK = 128

# The admitted ways of computing the quantized activation (the module docstring); the first is the stated rule and
# the default of reference(), oracle() and error_scale(). The judge (harness/judge/values/conventions.py) accepts an output
# that is within budget of any one convention's oracle.
CONVENTIONS = ("divide", "reciprocal", "inverse_scale", "inverse_scale_torch")


def _cdiv(a, b):
    return -(-a // b)


def _scale_of(amax):
    # A tensor divisor on purpose: on CUDA, `amax / 448.0` becomes amax * (1/448), which is not the IEEE quotient.
    return torch.where(amax > 0, amax / torch.full_like(amax, FP8_MAX), torch.ones_like(amax))


def to_fp8_range(t32, amax, convention="divide"):
    """(v, scale): fp32 t mapped onto e4m3's range by `convention` (before the clamp and the cast) and the scale its
    quantized values are dequantized by; amax broadcasts against t32. Tensor operands throughout, on purpose: on
    CUDA, `tensor / python_scalar` is a multiplication by the scalar's reciprocal, not the IEEE quotient."""
    nonzero = amax > 0
    one, fmax = torch.ones_like(amax), torch.full_like(amax, FP8_MAX)
    if convention in ("divide", "reciprocal"):
        scale = _scale_of(amax)
        return (t32 / scale if convention == "divide" else t32 * (one / scale)), scale
    if convention == "inverse_scale":
        inv = torch.where(nonzero, fmax / amax, one)
        return t32 * inv, one / inv
    if convention == "inverse_scale_torch":
        inv = torch.where(nonzero, (one / amax) * fmax, one)
        return t32 * inv, _scale_of(amax)
    raise ValueError(f"unknown quantization convention {convention!r}; known: {', '.join(CONVENTIONS)}")


def quantize_act_1x128(x, convention="divide"):
    """x (M, K) -> (xq (M, K) float8_e4m3fn, x_scale (M, ceil(K/128)) float32), the recipe in the module docstring
    under `convention`. Works in float32 whatever the input dtype (bf16 and fp64-upcast bf16 give the same bits);
    zero padding of the last block changes no amax."""
    M, K = x.shape
    KB = _cdiv(K, BLOCK)
    t = F.pad(x.float(), (0, KB * BLOCK - K)).view(M, KB, BLOCK)
    v, scale = to_fp8_range(t, t.abs().amax(dim=2, keepdim=True), convention)
    q = v.clamp(-FP8_MAX, FP8_MAX).to(FP8).view(M, KB * BLOCK)[:, :K]
    return q, scale.view(M, KB)


def quantize_weight_128x128(w):
    """w (N, K) -> (w_fp8 (N, K) float8_e4m3fn, w_scale (ceil(N/128), ceil(K/128)) float32), the divide convention
    per 128x128 block."""
    N, K = w.shape
    NB, KB = _cdiv(N, BLOCK), _cdiv(K, BLOCK)
    t = F.pad(w.float(), (0, KB * BLOCK - K, 0, NB * BLOCK - N)).view(NB, BLOCK, KB, BLOCK)
    scale = _scale_of(t.abs().amax(dim=(1, 3), keepdim=True))
    q = (t / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(NB * BLOCK, KB * BLOCK)[:N, :K]
    return q.contiguous(), scale.view(NB, KB).contiguous()


def make_inputs(shape, dtype, seed, device):
    """x (M, K) in `dtype` (bfloat16), w_fp8 (N, K) float8_e4m3fn, w_scale (ceil(N/128), ceil(K/128)) float32.
    x: rows of very different scale (2**-6 .. 2**3) times a per-K-block scale (2**-3 .. 2**3, so a row's 1x128
    blocks need different scales and one scale per row is wrong), outliers 50-100x the typical size in about half
    the rows (~1 in 128 entries: they set their block's amax, others have none), ~1 row in 16 all zero and ~1 block
    in 16 all zero (the zero-amax rule). w: output channels of different scale (2**-4 .. 2**2, within one 128x128
    block too), a per-block scale (2**-3 .. 2**3), rare outliers (~1 in 512), ~1 block in 8 all zero (never block
    (0, 0), or a one-block case would have an all-zero weight); quantized by the reference's own rule."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    KB, NB = _cdiv(K, BLOCK), _cdiv(N, BLOCK)
    g = torch.Generator(device=device).manual_seed(seed)

    def pow2(lo, hi, size):
        return torch.exp2(torch.randint(lo, hi + 1, size, generator=g, device=device).float())

    def outliers(t, rows, p):
        where = torch.rand(rows, K, generator=g, device=device) < p
        size = 50 + 50 * torch.rand(rows, K, generator=g, device=device)
        sign = torch.where(torch.rand(rows, K, generator=g, device=device) < 0.5, -1.0, 1.0)
        return torch.where(where, sign * size, t)

    def per_k_block(v):  # (rows, KB) -> (rows, K)
        return v.repeat_interleave(BLOCK, dim=1)[:, :K]

    x = torch.randn(M, K, generator=g, device=device, dtype=torch.float32)
    x = x * per_k_block(pow2(-3, 3, (1, KB)))
    has_outliers = torch.rand(M, 1, generator=g, device=device) < 0.5
    x = torch.where(has_outliers, outliers(x, M, 1 / 128), x)
    x = x * pow2(-6, 3, (M, 1))
    zero_blocks = per_k_block((torch.rand(M, KB, generator=g, device=device) < 1 / 16).float()) > 0
    zero_rows = torch.rand(M, 1, generator=g, device=device) < 1 / 16
    x = x.masked_fill(zero_blocks | zero_rows, 0.0).to(dtype).contiguous()

    w = torch.randn(N, K, generator=g, device=device, dtype=torch.float32)
    w = outliers(w, N, 1 / 512) * pow2(-4, 2, (N, 1))
    zero_block = torch.rand(NB, KB, generator=g, device=device) < 1 / 8
    zero_block[0, 0] = False                       # never the whole weight (a one-block case would be all zero)
    block_scale = pow2(-3, 3, (NB, KB)).masked_fill(zero_block, 0.0)
    w = w * per_k_block(block_scale).repeat_interleave(BLOCK, dim=0)[:N]
    w_fp8, w_scale = quantize_weight_128x128(w)
    return x, w_fp8, w_scale


def _weight_scale_per_channel(w_scale, N):
    """(NB, KB) -> (N, KB): the scale row of each output channel's block."""
    return w_scale.repeat_interleave(BLOCK, dim=0)[:N]


def reference(x, w_fp8, w_scale, convention="divide"):
    """Quantize x per 1x128 block; per K block, the exact fp8 products summed in fp32, scaled by x_scale * w_scale
    and added to an fp32 accumulator (DeepGEMM's order); bf16 out."""
    M, K = x.shape
    N = w_fp8.shape[0]
    xq, xs = quantize_act_1x128(x, convention)
    ws = _weight_scale_per_channel(w_scale.float(), N)
    out = torch.zeros(M, N, dtype=torch.float32, device=x.device)
    for kb in range(xs.shape[1]):
        k0, k1 = kb * BLOCK, min(K, (kb + 1) * BLOCK)
        partial = xq[:, k0:k1].float() @ w_fp8[:, k0:k1].float().t()
        out += partial * (xs[:, kb:kb + 1] * ws[:, kb][None, :])
    return out.to(x.dtype)


def rows(index, x, w_fp8, w_scale):
    """The inputs whose reference is rows `index` (dim -2) of this call's (x is quantized per 1x128 block of a
    row): the judge checks a few sampled rows of every timed output against the oracle of just those rows
    (gauntlet.judge.values.sampled)."""
    return x[index], w_fp8, w_scale


def _dequantized_weight64(w_fp8, w_scale):
    K = w_fp8.shape[1]
    ws = _weight_scale_per_channel(w_scale.double(), w_fp8.shape[0]).repeat_interleave(BLOCK, dim=1)[:, :K]
    return w_fp8.double() * ws


def _dequantized64(x, w_fp8, w_scale, convention):
    K = x.shape[1]
    xq, xs = quantize_act_1x128(x, convention)
    xd = xq.double() * xs.double().repeat_interleave(BLOCK, dim=1)[:, :K]
    return xd, _dequantized_weight64(w_fp8, w_scale)


def oracle(x, w_fp8, w_scale, convention="divide"):
    """The reference's own activation quantization under `convention` (bit for bit) and the stored weight,
    dequantized, multiplied in float64 (xq * sx and wq * sw are exact in float64; the per-block sums are the same
    sums regrouped)."""
    xd, wd = _dequantized64(x, w_fp8, w_scale, convention)
    return xd @ wd.t()


def error_scale(x, w_fp8, w_scale, convention="divide"):
    """sqrt(sum_k (xd[m,k] * wd[n,k])**2) over the dequantized operands: what fp32 accumulation error (random sign,
    adding in quadrature) scales with. Called on float64-upcast inputs (exact for bf16, fp8 and fp32 values)."""
    xd, wd = _dequantized64(x, w_fp8, w_scale, convention)
    return ((xd * xd) @ (wd * wd).t()).sqrt()


def negative_controls():
    """Plausible wrong kernels the checker must reject (each differs from the oracle at the test's 67x67x67,
    where K is a single block, so per-row activation scales are not among them)."""

    def _with_x(xd, w_fp8, w_scale, dtype):
        return (xd @ _dequantized_weight64(w_fp8, w_scale).t()).to(dtype)

    def no_quantization(x, w_fp8, w_scale):
        # activations left in bf16 (a bf16 x dequantized-fp8 GEMM)
        return _with_x(x.double(), w_fp8, w_scale, x.dtype)

    def per_tensor_activation_scale(x, w_fp8, w_scale):
        # one scale for all of x instead of one per 1x128 block
        t = x.float()
        scale = _scale_of(t.abs().amax())
        return _with_x(((t / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).float() * scale).double(), w_fp8, w_scale,
                       x.dtype)

    def e5m2_instead(x, w_fp8, w_scale):
        # activations quantized to float8_e5m2 (2 mantissa bits) with the same block rule
        M, K = x.shape
        KB = _cdiv(K, BLOCK)
        t = F.pad(x.float(), (0, KB * BLOCK - K)).view(M, KB, BLOCK)
        scale = _scale_of(t.abs().amax(dim=2, keepdim=True))
        xd = ((t / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e5m2).float() * scale).view(M, -1)[:, :K]
        return _with_x(xd.double(), w_fp8, w_scale, x.dtype)

    def _blocked(x, w_fp8, w_scale, amax_of, scale_dtype=torch.float32):
        # the divide rule per 1x128 block with amax from amax_of and the scale stored in scale_dtype
        M, K = x.shape
        KB = _cdiv(K, BLOCK)
        t = F.pad(x.float(), (0, KB * BLOCK - K)).view(M, KB, BLOCK)
        scale = _scale_of(amax_of(t)).to(scale_dtype).float()
        xd = ((t / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).float() * scale).view(M, -1)[:, :K]
        return _with_x(xd.double(), w_fp8, w_scale, x.dtype)

    def signed_amax(x, w_fp8, w_scale):
        # amax = max(x) instead of max |x|: a block whose extreme value is negative saturates
        return _blocked(x, w_fp8, w_scale, lambda t: t.amax(dim=2, keepdim=True).clamp_min(0))

    def scale_in_bf16(x, w_fp8, w_scale):
        # the activation scale rounded to bfloat16, quantizing and dequantizing by it: another fp8 grid per block
        return _blocked(x, w_fp8, w_scale, lambda t: t.abs().amax(dim=2, keepdim=True), torch.bfloat16)

    return {"no_quantization": no_quantization, "per_tensor_activation_scale": per_tensor_activation_scale,
            "e5m2_instead": e5m2_instead, "signed_amax": signed_amax, "scale_in_bf16": scale_in_bf16}
