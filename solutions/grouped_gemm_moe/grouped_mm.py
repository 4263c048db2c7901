"""Baseline: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs), PyTorch's own grouped GEMM (2-D x 3-D with int32
cumulative end offsets: exactly this problem's convention).

What it does (aten/src/ATen/native/cuda/GroupedBlas.cpp, GroupedMMUtils.h):
- CUDA, bf16 in and out, sm90 / sm100: a CUTLASS grouped GEMM reading offs on the device (no host sync).
- Any other dtype (fp16) or GPU: at::native::_grouped_mm_fallback, a loop of at::mm_out per group after copying
  offs to the host. That is what torch gives an fp16 user, so it is timed as such; describe() records the path.
- Either way it insists that both operands' row strides be multiples of 16 bytes (K % 8 == 0 for 16-bit) and
  that data pointers be 16-byte aligned, and raises otherwise ("strides should be multiple of 16 bytes"). This
  solution must be right on the whole domain (K = 1, primes, ...), so for those shapes, and wherever _grouped_mm
  does not exist, it computes the same thing with a per-expert loop of torch.mm. None of the benchmark shapes
  takes that path.
- Its output has padded row strides when N % 8 != 0 (for TMA stores); made contiguous then (not in the benchmark).
"""
import torch

BACKEND = "torch"


def _grouped_mm_ok(x, w):
    if not hasattr(torch, "_grouped_mm") or x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        return False
    step = 16 // x.element_size()
    wt = w.transpose(-2, -1)
    return (x.stride(1) == 1 and x.stride(0) % step == 0 and x.data_ptr() % 16 == 0
            and wt.stride(-2) == 1 and wt.stride(-1) % step == 0 and w.data_ptr() % 16 == 0)


def _loop(x, w, offs):
    out = torch.empty((x.shape[0], w.shape[1]), dtype=x.dtype, device=x.device)
    start = 0
    for e, end in enumerate(offs.tolist()):
        if end > start:
            torch.mm(x[start:end], w[e].t(), out=out[start:end])
        start = end
    return out


def solve(x, w, offs):
    if not _grouped_mm_ok(x, w):
        return _loop(x, w, offs)       # unaligned K (or no _grouped_mm in this torch): same math, per expert
    out = torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
    return out if out.is_contiguous() else out.contiguous()


def describe(x, w, offs):
    if not _grouped_mm_ok(x, w):
        return "per-expert torch.mm loop (operands not 16-byte aligned for torch._grouped_mm)"
    fast = False
    if x.is_cuda and x.dtype == torch.bfloat16:
        cap = torch.cuda.get_device_capability(x.device)
        fast = cap == (9, 0) or cap[0] == 10
    return ("torch._grouped_mm CUTLASS kernel (bf16, sm90/sm100, offs read on the device)" if fast else
            "torch._grouped_mm fallback: at::mm_out per group after copying offs to the host")
