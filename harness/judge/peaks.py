"""The ceilings on this card, measured by the trusted parent before any candidate runs: the roofline check's floor.

Timed the same way as every side (flushed L2, held stream: harness.gpu), so a ceiling and a candidate's time are
comparable; the best of several calls, since anything else on the GPU (judges sharing it) only slows a call down.
"""
from __future__ import annotations

import torch

from harness.gpu import Flusher, held_ms


def measure_peaks(device, dtypes: dict) -> dict:
    """The ceilings on this card, measured now: cuBLAS matmul rate per dtype at 8192^3 and copy bandwidth."""
    peaks = {}
    flush = Flusher(device)
    n = 8192
    for name, (dtype, tf32) in dtypes.items():
        if dtype == torch.int8:
            # cuBLASLt int8 in its fast layout (B column-major): the ceiling int8 kernels are held to.
            a = torch.randint(-128, 128, (n, n), dtype=torch.int8, device=device)
            b = torch.randint(-128, 128, (n, n), dtype=torch.int8, device=device).t()
            try:
                torch._int_mm(a, b)
                ms = held_ms(lambda: torch._int_mm(a, b), flush, n=7, stat=min)
                peaks[name] = {"tflops": 2 * n**3 / ms / 1e9, "note": "int8 TOPS via torch._int_mm, B column-major"}
            except (RuntimeError, AttributeError):
                pass
            del a, b
            continue
        if name.startswith("float8"):
            # fp8 problems store bf16 but multiply in fp8: their ceiling is cuBLASLt's fp8 rate (~2x bf16), or
            # the roofline check would reject an honest fp8 kernel.
            peaks[name] = _fp8_peak(device, n, flush)
            continue
        if not dtype.is_floating_point or dtype.itemsize < 2:
            continue
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        try:
            a = torch.randn(n, n, device=device).to(dtype)
            b = torch.randn(n, n, device=device).to(dtype)
            torch.matmul(a, b)
            ms = held_ms(lambda: torch.matmul(a, b), flush, n=7, stat=min)
            peaks[name] = {"tflops": 2 * n**3 / ms / 1e9}
            del a, b
        finally:
            torch.set_float32_matmul_precision(before)
    src = torch.empty(1 << 28, dtype=torch.int32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    ms = held_ms(lambda: dst.copy_(src), flush, n=10, stat=min)
    peaks["copy_gbps"] = 2 * src.numel() * 4 / ms / 1e6
    del src, dst
    torch.cuda.empty_cache()
    return peaks


def _fp8_peak(device, n, flush) -> dict:
    try:
        a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        run = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
        run()
        ms = held_ms(run, flush, n=7, stat=min)
        return {"tflops": 2 * n**3 / ms / 1e9, "note": "fp8 e4m3 via torch._scaled_mm"}
    except Exception as exc:  # noqa: BLE001 - no fp8 GEMM here: no compute ceiling, say why
        return {"tflops": None, "note": f"fp8 peak not measured: {type(exc).__name__}"}
