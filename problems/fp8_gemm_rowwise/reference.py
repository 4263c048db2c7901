"""FP8 GEMM with row-wise scaling, the specification: out = x @ w.T with x (M, K) and w (N, K) in bfloat16, where
the kernel quantizes both operands to float8_e4m3fn itself: one fp32 scale per row of x (per token) and one per row
of w (per output channel), multiplies in fp8 with fp32 accumulation, applies both scales, and writes bfloat16 (M, N).

The quantization rule (exact; a kernel must reproduce it bit for bit, which is possible because every step is one
correctly rounded IEEE operation):
  amax  = max_k |t[r, k]|                        over the whole row r, in fp32 (exact)
  scale = amax / 448   (fp32 division, round to nearest even)   if amax > 0
        = 1.0                                                   if amax == 0   (an all-zero row: q = 0, out = 0)
  q     = e4m3fn( clamp(t / scale, -448, 448) )  t / scale is one fp32 division (round to nearest even), the
                                                 clamp saturates, and the cast to e4m3fn rounds to nearest even
                                                 (subnormals included)
  dequantized value = q * scale
Division, not multiplication by a reciprocal: t * (1 / scale) rounds twice and lands on the other side of an fp8
rounding boundary now and then, which moves one product by a whole fp8 step. In Triton, use tl.math.div_rn: plain
`/` on fp32 compiles to div.full.f32 (up to 2 ulp) on NVIDIA GPUs, while the CPU interpreter divides exactly, so a
kernel using `/` can pass on the CPU and fail on the GPU. In PyTorch divide by a tensor, not a Python scalar (CUDA
turns `tensor / scalar` into a multiplication by the reciprocal).

The judge's oracle applies exactly this quantization and then computes the dequantized product in float64, so an
honest kernel differs from it only by fp32 accumulation order and the bfloat16 output rounding, while a kernel that
skips quantization, uses one scale per tensor, or uses e5m2 is off by whole fp8 rounding errors and fails.
"""
import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite float8_e4m3fn


def quantize_rows(t):
    """Row-wise e4m3 quantization of a 2-D tensor: (q float8_e4m3fn, scale float32 (rows, 1)). The rule is in the
    module docstring. Runs in float32 whatever the input dtype (bf16 and fp64-upcast bf16 give the same bits)."""
    t32 = t.float()
    amax = t32.abs().amax(dim=1, keepdim=True)
    # A tensor divisor on purpose: on CUDA, `amax / 448.0` becomes amax * (1/448), which is not the IEEE quotient.
    scale = torch.where(amax > 0, amax / torch.full_like(amax, FP8_MAX), torch.ones_like(amax))
    q = (t32 / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, scale


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


def reference(x, w):
    """Quantize both operands row-wise, multiply the fp8 values exactly with fp32 accumulation, scale, round."""
    xq, sx = quantize_rows(x)
    wq, sw = quantize_rows(w)
    acc = xq.float() @ wq.float().t()          # fp8 x fp8 products are exact in fp32; the sum rounds in fp32
    return (acc * sx * sw.t()).to(x.dtype)


def _dequantized64(x, w):
    xq, sx = quantize_rows(x)
    wq, sw = quantize_rows(w)
    return xq.double() * sx.double(), wq.double() * sw.double()


def oracle(x, w):
    """The reference's own quantization (bit for bit), then the product of the dequantized values in float64."""
    xd, wd = _dequantized64(x, w)
    return xd @ wd.t()


def error_scale(x, w):
    """sqrt(sum_k (xd[m,k] * wd[n,k])**2) over the dequantized operands: the root-sum-square of the products summed
    into out[m, n], which fp32 accumulation error (random sign, adding in quadrature) scales with. Called on
    float64-upcast inputs; quantize_rows gives the same bits for them."""
    xd, wd = _dequantized64(x, w)
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

    return {"no_quantization": no_quantization, "per_tensor_scale": per_tensor_scale, "e5m2_instead": e5m2_instead}
