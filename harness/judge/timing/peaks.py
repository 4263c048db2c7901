"""The ceilings on this card, measured by the trusted parent before any candidate runs: the roofline check's floor.

Timed the same way as every side (flushed L2, held stream: gauntlet.gpu), so a ceiling and a candidate's time are
comparable; the best of several calls, since anything else on the GPU (judges sharing it) only slows a call down.
"""
from __future__ import annotations

import torch

from ...gpu import Flusher, held_ms
from ..process import cache
from ...reasons import Reason

# A custom kernel can beat cuBLAS, but not the hardware: allow this much above the ceilings measured in the run
# (cuBLAS bf16 runs well below the datasheet's dense rate, ~990 TFLOP/s on H100/H200; copy, ~90% of HBM bandwidth).
ROOFLINE_MARGIN = {"tflops": 1.5, "gbps": 1.3}
STORE = "peaks.json"     # in the judge's cache folder (gauntlet.judge.process.cache): per card, ceilings and idle flush


def measure_peaks(device, dtypes: dict) -> dict:
    """The ceilings on this card, measured now: cuBLAS matmul rate per dtype at 8192^3 and copy bandwidth, with
    the card to this judge alone (gauntlet.judge.timing.turns)."""
    from . import turns
    with turns.alone("cuda"):
        return _measure(device, dtypes)


def _measure(device, dtypes: dict) -> dict:
    peaks = {}
    flush = Flusher(device)
    n = 8192
    for name, (dtype, tf32) in dtypes.items():
        if dtype == torch.int8:
            got = _int8_peak(device, n, flush)
            if got:
                peaks[name] = got
            continue
        if name.startswith("float8"):
            # fp8 problems store bf16 but multiply in fp8: their ceiling is cuBLASLt's fp8 rate (~2x bf16), or
            # the roofline check would reject an honest fp8 kernel.
            peaks[name] = _fp8_peak(device, n, flush)
            continue
        if not dtype.is_floating_point or dtype.itemsize < 2:
            continue
        peaks[name] = {"tflops": _matmul_tflops(device, dtype, tf32, n, flush)}
    src = torch.empty(1 << 28, dtype=torch.int32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    ms = held_ms(lambda: dst.copy_(src), flush, n=10, stat=min)
    peaks["copy_gbps"] = 2 * src.numel() * 4 / ms / 1e6
    del src, dst
    torch.cuda.empty_cache()
    return peaks


def _matmul_tflops(device, dtype, tf32: bool, n: int, flush) -> float:
    """cuBLAS's best rate (TFLOP/s) for an n^3 matmul in `dtype` on this card."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        torch.matmul(a, b)
        ms = held_ms(lambda: torch.matmul(a, b), flush, n=7, stat=min)
        return 2 * n**3 / ms / 1e9
    finally:
        torch.set_float32_matmul_precision(before)


def _int_mm_tops(device, n: int, flush) -> float:
    """cuBLASLt's best int8 rate (TOPS) for an n^3 torch._int_mm in its fast layout (B column-major)."""
    a = torch.randint(-128, 128, (n, n), dtype=torch.int8, device=device)
    b = torch.randint(-128, 128, (n, n), dtype=torch.int8, device=device).t()
    torch._int_mm(a, b)
    ms = held_ms(lambda: torch._int_mm(a, b), flush, n=7, stat=min)
    return 2 * n**3 / ms / 1e9


def _int8_peak(device, n, flush) -> dict | None:
    """The int8 ceiling: the better of cuBLASLt's int8 rate (torch._int_mm in its fast layout, B column-major) and
    twice cuBLAS's bf16 rate. cuBLASLt's int8 alone reaches about half of what the tensor cores do, so an honest
    exact int8 kernel (int8_gemm/cupy_wgmma) runs well past it: with it alone as the ceiling, that kernel would be
    refused as faster than the hardware (docs/benchmarks.md). On Ampere and Hopper the tensor cores'
    dense int8 rate is twice their bf16 rate (A100 624 vs 312, H100 1979 vs 989 on the datasheets), which the
    measured bf16 rate stands for here."""
    out = {}
    try:
        out["int_mm"] = _int_mm_tops(device, n, flush)
    except (RuntimeError, AttributeError):
        pass
    try:
        out["bf16_x2"] = 2 * _matmul_tflops(device, torch.bfloat16, False, n, flush)
    except RuntimeError:
        pass
    if not out:
        return None
    best = max(out, key=out.get)
    note = {"int_mm": "int8 TOPS via torch._int_mm, B column-major",
            "bf16_x2": "twice cuBLAS's bf16 TFLOP/s (the tensor cores' int8 rate), over torch._int_mm's "
                       f"{out.get('int_mm', 0):.0f} TOPS"}[best]
    return {"tflops": out[best], "note": note}


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


def cached_peaks(device, dtypes: dict) -> dict:
    """The ceilings of `dtypes`, from the judge's cache where this card, driver and torch/CUDA build were measured
    before, else measured now and added to it: measured once per machine, not once per judgement (each dtype's
    ceiling costs about a second, and a problem has several). A ceiling that reads low (taken while the
    GPU was shared) is measured again when it matters: a time over it is re-checked against fresh ceilings before
    any below_roofline (gauntlet.judge.timing.timed), and the better figure is what the cache keeps from then on
    (`remember`). The cache lives beside the bytecode cache, where no confined worker can write."""
    key = _card_key(device)
    store = cache.read_json(STORE)
    known = store.get(key, {})
    missing = {name: spec for name, spec in dtypes.items() if name not in known}
    if missing or "copy_gbps" not in known:
        fresh = measure_peaks(device, missing)
        known = {**known, **fresh}
        remember(device, known)
    return {name: known[name] for name in list(dtypes) + ["copy_gbps"] if name in known}   # (not quiet_ms)


def remember(device, peaks: dict) -> None:
    """Keep the best figure of each ceiling for this card in the cache."""
    key = _card_key(device)
    store = cache.read_json(STORE)
    old = store.get(key, {})
    merged = dict(old)
    for name, value in peaks.items():
        if name == "copy_gbps":
            merged[name] = max(float(value), float(old.get(name) or 0.0))
        elif isinstance(value, dict) and value.get("tflops", 0.0) >= (old.get(name) or {}).get("tflops", 0.0):
            merged[name] = value
    store[key] = merged
    cache.write_json(STORE, store)


def cached_quiet(device) -> float | None:
    """This card's idle L2-flush time (ms), as a baseline worker measured it before any candidate existed in an
    earlier judgement, or None. With it, a judgement need not hold its candidate's worker back until its own
    baseline worker has measured the idle GPU (gauntlet.judge.evaluate): the candidate's correctness phase overlaps
    the baseline worker's start-up."""
    value = cache.read_json(STORE).get(_card_key(device), {}).get("quiet_ms")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def remember_quiet(device, quiet_ms) -> None:
    """Keep the least idle flush time measured on this card (a busier GPU only reads slower)."""
    if not isinstance(quiet_ms, (int, float)) or quiet_ms <= 0:
        return
    key = _card_key(device)
    store = cache.read_json(STORE)
    entry = store.setdefault(key, {})
    old = entry.get("quiet_ms")
    entry["quiet_ms"] = min(float(quiet_ms), float(old)) if isinstance(old, (int, float)) and old > 0 else \
        float(quiet_ms)
    cache.write_json(STORE, store)


def _card_key(device) -> str:
    import ctypes
    props = torch.cuda.get_device_properties(device)
    driver = ctypes.c_int(0)
    try:
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(driver))
    except OSError:
        pass
    return "|".join([props.name, str(getattr(props, "uuid", "")), f"driver {driver.value}",
                     f"torch {torch.__version__}", f"cuda {torch.version.cuda}"])


def physics(entry: dict, peaks: dict, remeasure=None) -> list[Reason]:
    """A timed shape's entry faster than the hardware: below_roofline. Before rejecting, the ceilings are measured
    again (`remeasure`) and the better figures kept: a ceiling taken while other work shared the GPU reads low (with
    other judges on the card, cuBLAS bf16 can read about half its rate: docs/benchmarks.md)."""
    reasons = over_ceilings(entry, peaks)
    if reasons and remeasure is not None:
        for key, fresh in remeasure().items():
            old = peaks.get(key)
            if key == "copy_gbps":
                peaks[key] = max(old or 0.0, fresh)
            elif old is None or fresh.get("tflops", 0.0) > old.get("tflops", 0.0):
                peaks[key] = fresh
        reasons = over_ceilings(entry, peaks)
    return reasons


def remeasure(judge, spec):
    if judge.device != "cuda":
        return None

    def again() -> dict:
        try:
            fresh = measure_peaks(torch.device("cuda"), {spec.name: (spec.torch_dtype(), spec.tf32)})
        except torch.OutOfMemoryError:     # no room beside the workers' sets: keep the figures measured at start
            torch.cuda.empty_cache()
            return {}
        remember(torch.device("cuda"), fresh)
        return fresh
    return again


def over_ceilings(entry: dict, peaks: dict) -> list[Reason]:
    reasons = []
    peak = (peaks.get(entry["dtype"]) or {}).get("tflops")
    if peak and entry["tflops"] > ROOFLINE_MARGIN["tflops"] * peak:
        reasons.append(Reason("below_roofline", f"{entry['tflops']:.0f} TFLOP/s on {entry['shape']} is over "
                                                f"{ROOFLINE_MARGIN['tflops']}x the {peak:.0f} measured on this GPU"))
    bw = peaks.get("copy_gbps")
    if bw and entry["gbps"] > ROOFLINE_MARGIN["gbps"] * bw:
        reasons.append(Reason("below_roofline", f"{entry['gbps']:.0f} GB/s on {entry['shape']} is over "
                                                f"{ROOFLINE_MARGIN['gbps']}x the {bw:.0f} GB/s device copy"))
    return reasons
