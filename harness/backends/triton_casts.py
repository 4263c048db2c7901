"""Float conversions for Triton's CPU interpreter that round as Triton does on an NVIDIA GPU (sm_90: H100, H200).

Why this exists. The interpreter (triton/runtime/interpreter.py, Triton 3.6.0) converts to and from fp8 with its
own bit manipulation, `_convert_float`, which gets the values a correct fp8 kernel produces wrong: fp32 -> e4m3fn
rounds ties up (1 + 1/16 -> 1.125, not 1.0), drops the carry of a mantissa that rounds up into the next binade
(1.9375 -> 1.0, not 2.0), flushes or mangles subnormals (3 * 2**-10 -> 2**-9, not 2**-8), and turns out-of-range
values into whatever its clamped exponent spells (470 -> NaN, inf -> 256, NaN -> 384); decoding e5m2 subnormals
gives 0 and the e4m3fn NaN gives 480. Left as they are, they would reject on the CPU a kernel that quantizes to fp8
correctly.

What the GPU does, read from Triton's NVIDIA lowering of `FpToFpOp` (third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/
ElementwiseOpToLLVM.cpp) and the PTX `cvt` rules (not measured on a GPU by this module's tests):
- fp32, fp16, bf16 -> e4m3fn / e5m2, default rounding ("rtne"): `cvt.rn.satfinite`: round to nearest even,
  subnormals kept, NaN stays NaN, and anything beyond the largest finite value, infinities included, saturates to
  +-448 (e4m3fn, which has no inf) or +-57344 (e5m2). torch's own e5m2 cast overflows to inf instead; its e4m3fn
  cast saturates like the GPU.
- fp32 -> e5m2 with fp_downcast_rounding="rtz": `cvt.rz.f16.f32` then truncation to the top byte: round toward
  zero, finite values beyond 57344 give 57344, inf stays inf.
- fp32 -> fp16 / bf16: `cvt.rn` / `cvt.rz`: round to nearest even (overflow to inf) or toward zero (overflow to the
  largest finite value), subnormals kept.
- e4m3fn / e5m2 -> fp16, bf16, fp32: exact.
- Everything else through this path does not compile for the GPU (`report_fatal_error("Unsupported rounding mode
  for conversion.")`): fp32 -> e4m3fn with "rtz", fp16/bf16 -> fp8 with "rtz", fp8 <-> fp64, fp8 <-> fp8, fp64 with
  "rtz". The interpreter refuses them too (`GpuRejects`), so a kernel that would not build on the GPU is not passed
  on the CPU.
This models sm_90 and later. On sm_89 (Ada) Triton converts fp32 -> fp8 through an fp16 rounded toward zero, which
can differ by one fp8 step near ties; the harness's GPUs are Hopper. One sm_90 quirk is not copied: Triton widens
e5m2 to bf16 with a shift and a multiplication by 2**112, which turns an e5m2 inf or NaN into a finite bf16
(65536 for inf); here they stay inf and NaN.

How: every conversion is done by torch's own correctly rounded casts (round to nearest even). A downcast from fp64
first rounds to fp32 with round-to-odd, which makes the second rounding exact (fp32 keeps more than two bits beyond
any target here). Saturation clamps before rounding; round toward zero takes the nearest-even result and steps one
unit toward zero where that result is larger in magnitude than the exact value. Other fp8 flavours (fp8e4b15,
fp8e4b8, fp8e5b16: pre-sm_89 emulation and AMD formats) are left to the interpreter.
"""
from __future__ import annotations

import numpy as np
import torch

# Triton dtype name -> (torch dtype, integer view of the same width, numpy storage dtype in the interpreter)
FORMATS = {
    "fp8e4nv": (torch.float8_e4m3fn, torch.int8, np.uint8),
    "fp8e5": (torch.float8_e5m2, torch.int8, np.uint8),
    "bf16": (torch.bfloat16, torch.int16, np.uint16),
    "fp16": (torch.float16, torch.int16, np.float16),
    "fp32": (torch.float32, torch.int32, np.float32),
    "fp64": (torch.float64, torch.int64, np.float64),
}
FP8 = ("fp8e4nv", "fp8e5")
SATURATE = {"fp8e4nv": 448.0, "fp8e5": 57344.0}      # largest finite values: cvt.rn.satfinite's limits
_WIDTH = {"fp8e4nv": 8, "fp8e5": 8, "bf16": 16, "fp16": 16, "fp32": 32, "fp64": 64}


class GpuRejects(ValueError):
    """A conversion Triton's NVIDIA backend refuses to compile: the candidate's kernel would not build on the GPU."""


def handles(src: str, dst: str) -> bool:
    """Whether `convert` owns this conversion (both formats are ones the GPU path here knows)."""
    return src in FORMATS and dst in FORMATS and src != dst


def fp_to_fp_rule(src: str, dst: str, rounding: str | None) -> str:
    """How the GPU converts src -> dst through Triton's FpToFpOp ("exact", "rtne", "rtz"), or GpuRejects saying why
    it does not compile. `rounding` is fp_downcast_rounding as Triton passes it: None on upcasts, else "rtne"/"rtz"."""
    if src in FP8 and dst in ("fp16", "bf16", "fp32") and rounding is None:
        return "exact"
    if dst in FP8 and src in ("fp32", "fp16", "bf16") and rounding == "rtne":
        return "rtne"
    if (src, dst, rounding) == ("fp32", "fp8e5", "rtz") or (src == "fp32" and dst in ("fp16", "bf16")
                                                             and rounding in ("rtne", "rtz")):
        return rounding
    how = f" with fp_downcast_rounding={rounding!r}" if rounding else ""
    raise GpuRejects(f"Triton's NVIDIA backend has no conversion from {src} to {dst}{how}: this kernel does not "
                     "compile on the GPU (the CPU interpreter refuses it the same way)")


def convert(data: np.ndarray, src: str, dst: str, mode: str) -> np.ndarray:
    """Convert the interpreter's storage array `data` (format `src`) to format `dst`, rounding with `mode`
    ("exact" for widening, "rtne", "rtz"); fp8 targets saturate under "rtne" as the GPU does. Returns the
    interpreter's storage array for `dst` (bits for fp8 and bf16)."""
    x = _as_torch(data, src)
    if mode == "exact" or _WIDTH[dst] > _WIDTH[src]:
        return _as_numpy(x.to(FORMATS[dst][0]), dst)
    exact = x.double()                                   # every source format widens to fp64 without rounding
    if mode == "rtne" and dst in SATURATE:
        exact = exact.clamp(-SATURATE[dst], SATURATE[dst])     # NaN passes through clamp
    out = _nearest_even(exact, src, dst)
    if mode == "rtz":
        out = _toward_zero(out, exact, dst)
    elif mode != "rtne":
        raise ValueError(f"unknown rounding mode {mode!r}")
    return _as_numpy(out, dst)


def _as_torch(data: np.ndarray, fmt: str) -> torch.Tensor:
    # A private C-contiguous copy: torch.from_numpy shares memory and wants it writable; the interpreter's arrays
    # may be read-only broadcast views, and 0-d arrays stay 0-d.
    t = torch.from_numpy(np.array(data, dtype=FORMATS[fmt][2], order="C", copy=True))
    return t.view(FORMATS[fmt][0]) if fmt in ("bf16", *FP8) else t


def _as_numpy(t: torch.Tensor, fmt: str) -> np.ndarray:
    if fmt in ("bf16", *FP8):
        return t.view(FORMATS[fmt][1]).numpy().view(FORMATS[fmt][2])
    return t.numpy()


def _nearest_even(exact: torch.Tensor, src: str, dst: str) -> torch.Tensor:
    """Correctly rounded `exact` (fp64 holding a value of format `src`) -> dst. torch rounds fp32 -> any narrower
    format correctly, and from fp64 it goes through fp32: exact when the value came from an fp32 or narrower source,
    a double rounding otherwise, which round-to-odd into fp32 first avoids."""
    if src == "fp64" and dst != "fp32":
        exact = _round_to_odd_f32(exact)
    return exact.to(FORMATS[dst][0])


def _round_to_odd_f32(exact: torch.Tensor) -> torch.Tensor:
    # An inexact result is replaced by the fp32 next to it toward zero with its lowest bit set: that keeps a sticky
    # bit below every bit the later rounding looks at, so rounding the fp32 to <= 22 bits is then exact.
    near = exact.float()
    bits = near.view(torch.int32)
    inexact = near.double() != exact
    too_big = near.double().abs() > exact.abs()
    bits = torch.where(too_big, bits - 1, bits)          # one step toward zero (inf steps to the largest finite)
    bits = torch.where(inexact & ~exact.isnan(), bits | 1, bits)
    return bits.view(torch.float32)


def _toward_zero(nearest: torch.Tensor, exact: torch.Tensor, dst: str) -> torch.Tensor:
    # Round-to-nearest and round-toward-zero differ by at most one unit, and only where nearest rounded away from
    # zero. On a sign-magnitude encoding, subtracting one from the bits steps the magnitude down by one unit, across
    # binades and into subnormals; from inf it gives the largest finite value, as IEEE round-toward-zero does.
    away = nearest.double().abs() > exact.abs()          # False for NaN and for an infinite exact value
    bits = nearest.view(FORMATS[dst][1])
    return torch.where(away, bits - 1, bits).view(FORMATS[dst][0])
