"""The baseline: what a PyTorch user has for DeepSeek-style block-scaled FP8. Quantize x per 1x128 block with torch
ops (the reference's exact rule), then
- on sm_90 with CUDA >= 12.9: torch._scaled_mm with 1x128 (activation) x 128x128 (weight) block scales, which torch
  hands to cuBLASLt (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F / BLK128x128_32F; fp32 accumulation, scales applied
  per K block). torch only implements this recipe on sm_90 (`_check_deepseek_support` in
  aten/src/ATen/native/cuda/ScaledBlas.cpp);
  if torch._scaled_mm refuses the pair, the explicit torch.nn.functional.scaled_mm (ScalingType.BlockWise1x128 /
  BlockWise128x128, same layouts) is tried;
- anywhere else (the CPU, other GPUs, or if both refuse): dequantize both operands to fp32 and run one fp32 GEMM
  (torch.matmul). describe() says which path ran, and the refusals if there were any.

_scaled_mm's layout rules for this pair (ScaledBlas.cpp and pytorch PR 166752, from cuBLASLt's docs):
- a = xq (M, K) row-major, b = w_fp8.t() (column-major (K, N)); K and N multiples of 16;
- scale_a (M, ceil(K/128)) fp32 with strides (1, M), i.e. M-major: allocated as (KB, M) and transposed;
- scale_b = w_scale.t(), (ceil(K/128), ceil(N/128)) with strides (1, KB): the (NB, KB) row-major w_scale as is;
- cuBLASLt reads the 128x128 scale rows with a leading dimension rounded up to 4 blocks (L4 = round_up(KB, 4)),
  which torch's v1 `_scaled_mm` check does not enforce: with KB % 4 != 0 the answer is silently wrong
  (PR 166752). So K is zero-padded to a multiple of 4 * 128 = 512 here, which makes KB % 4 == 0 and both layouts
  agree. M is padded to a multiple of 4 (cuBLASLt needs it for the 1x128 scales; vLLM pads the same way).
Padding is exact: zero rows/columns add nothing, their blocks get scale 1, the padded output is sliced away. The
DeepSeek-V3 benchmark shapes need no padding of the weight (K = 512 * j, N = 16 * i).
"""
import torch
import torch.nn.functional as F

BACKEND = "torch"

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK = 128

_api = []       # the scaled_mm API that worked on the first call: "v1" (torch._scaled_mm) or "v2" (F.scaled_mm)
_refused = []   # why neither did, if so (then this module stays on the dequantize path)


def _cdiv(a, b):
    return -(-a // b)


def _quantize_act_1x128(x):
    """x (M, K), K a multiple of 128 here -> (xq (M, K) fp8, scale (M, K/128) fp32). The reference's rule; tensor
    divisors on purpose (CUDA computes `tensor / python_scalar` as a multiply by the reciprocal)."""
    M, K = x.shape
    t = x.float().view(M, K // BLOCK, BLOCK)
    amax = t.abs().amax(dim=2, keepdim=True)
    scale = torch.where(amax > 0, amax / torch.full_like(amax, FP8_MAX), torch.ones_like(amax))
    return (t / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(M, K), scale.view(M, K // BLOCK)


def _use_scaled_mm(x):
    if _refused or x.device.type != "cuda" or not hasattr(torch, "_scaled_mm"):
        return False
    if torch.cuda.get_device_capability(x.device)[0] != 9:
        return False
    cuda = tuple(int(v) for v in (torch.version.cuda or "0.0").split(".")[:2])
    return cuda >= (12, 9)


def describe(x, w_fp8, w_scale):
    if _use_scaled_mm(x):
        solve(x, w_fp8, w_scale)         # settles the path: a refusal is recorded and reported below
    if _use_scaled_mm(x):
        M, K = x.shape
        N = w_fp8.shape[0]
        Kp, Np = _cdiv(K, 4 * BLOCK) * 4 * BLOCK, _cdiv(N, 16) * 16
        pad = "" if (Kp, Np) == (K, N) else f"; weight zero-padded to ({Np}, {Kp}) per call"
        api = "torch._scaled_mm" if _api[0] == "v1" else "torch.nn.functional.scaled_mm"
        return f"{api}, 1x128 x 128x128 block scales (cuBLASLt){pad}"
    why = f"_scaled_mm refused: {_refused[0]}" if _refused else "block-scaled _scaled_mm needs sm_90 and CUDA >= 12.9"
    return f"dequantize to fp32 + torch.matmul ({why})"


def _dequantize_path(x, w_fp8, w_scale):
    M, K = x.shape
    N = w_fp8.shape[0]
    KB = _cdiv(K, BLOCK)
    xq, xs = _quantize_act_1x128(F.pad(x, (0, KB * BLOCK - K)))
    xd = (xq.float().view(M, KB, BLOCK) * xs[:, :, None]).view(M, KB * BLOCK)[:, :K]
    ws = w_scale.repeat_interleave(BLOCK, dim=0)[:N].repeat_interleave(BLOCK, dim=1)[:, :K]
    wd = w_fp8.float() * ws
    return (xd @ wd.t()).to(x.dtype)


def _scaled_mm_path(x, w_fp8, w_scale):
    M, K = x.shape
    N = w_fp8.shape[0]
    Mp, Kp, Np = _cdiv(M, 4) * 4, _cdiv(K, 4 * BLOCK) * 4 * BLOCK, _cdiv(N, 16) * 16
    KBp = Kp // BLOCK
    xq, xs = _quantize_act_1x128(F.pad(x, (0, Kp - K, 0, Mp - M)))
    scale_a = xs.t().contiguous().t()                       # (Mp, KBp), strides (1, Mp)
    wq, ws = w_fp8, w_scale
    if (Np, Kp) != (N, K):
        wq = F.pad(w_fp8.view(torch.uint8), (0, Kp - K, 0, Np - N)).view(FP8)   # byte 0 is +0.0 in e4m3
    if ws.shape[1] != KBp:
        ws = F.pad(ws, (0, KBp - ws.shape[1]), value=1.0)
    ws = ws.contiguous()                                    # (NB, KBp) row-major
    if _api and _api[0] == "v2":
        out = F.scaled_mm(xq, wq.t(), scale_a, F.ScalingType.BlockWise1x128, ws.t(), F.ScalingType.BlockWise128x128,
                          output_dtype=x.dtype, use_fast_accum=False)
    else:
        out = torch._scaled_mm(xq, wq.t(), scale_a=scale_a, scale_b=ws.t(), out_dtype=x.dtype,
                               use_fast_accum=False)
    if (Mp, Np) != (M, N):
        out = out[:M, :N].contiguous()
    return out


def solve(x, w_fp8, w_scale):
    if _use_scaled_mm(x):
        if _api:
            return _scaled_mm_path(x, w_fp8, w_scale)
        # First call: torch._scaled_mm (v1, the recipe picked from the scale shapes), else the explicit v2 API
        # torch.nn.functional.scaled_mm; whichever works is kept. If neither does, remember why and dequantize.
        errors = []
        for api in ("v1", "v2"):
            if api == "v2" and not hasattr(F, "scaled_mm"):
                continue
            _api[:] = [api]
            try:
                return _scaled_mm_path(x, w_fp8, w_scale)
            except (RuntimeError, ValueError, NotImplementedError, TypeError, AttributeError) as exc:
                errors.append(f"{api}: {str(exc).splitlines()[0][:160]}")
        _api.clear()
        _refused.append("; ".join(errors) or "no scaled_mm API")
    return _dequantize_path(x, w_fp8, w_scale)
