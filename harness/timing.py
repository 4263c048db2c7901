"""GPU timing: candidate and baselines interleaved in one process, so clock and thermal drift cancel in the ratio.

Method (see shared GUIDE and the device METHOD notes):
- inputs rotate among several sets, all made before timing starts, so no timed call reads warm inputs;
- L2 is flushed (a write over a buffer twice its size) before every timed call, outside the timed region;
- each timed call gets fresh input values (rewritten in place from a fresh seed), and its output is poisoned
  before it is freed; the outputs of randomly chosen timed calls go back to the judge;
- each timed call is bracketed by CUDA events on the current stream, then a device-wide synchronize, so work the
  candidate left on other streams lands before the next measurement (and the host wall time shows it);
- short kernels are captured in CUDA graphs and replayed, which removes launch overhead from both sides alike;
- the order of sides is shuffled every repetition; warm-up and compilation happen before the first timed call.
"""
from __future__ import annotations

import random
import statistics
import time

import torch

GRAPH_BELOW_MS = 0.2      # below this per call, launch overhead would distort the ratio: use CUDA graphs


class _Flusher:
    def __init__(self, device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def __call__(self):
        self.buf.zero_()


def _graphs_for(fn, sets):
    """One captured graph per input set. Returns None when the callable is not capturable."""
    graphs = []
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for args in sets:
                fn(*args)
        torch.cuda.current_stream().wait_stream(stream)
        for args in sets:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = fn(*args)
            graphs.append((g, out))
        torch.cuda.synchronize()
        return graphs
    except Exception:  # noqa: BLE001 - not capturable (host sync, foreign stream): time with plain events
        torch.cuda.synchronize()
        return None


def _call_time(run, flush, before=None):
    if before is not None:
        before()
    flush()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    out = run()
    end.record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    return start, end, wall, out


def time_sides(sides: dict, sets: list, reps: int, refill=None, spots: int = 2, min_reps: int = 5,
               budget_s: float = 20.0) -> dict:
    """Time each side (label -> fn(*inputs)) on rotating input sets.

    `refill(k)` rewrites input set k in place with fresh values from a fresh seed and returns that seed; it runs
    before every timed call, outside the timed region, so no call can be answered from a cache keyed by pointer
    or by an earlier call. After each call its output is poisoned before it is freed. The candidate's outputs of
    `spots` randomly chosen timed calls are kept, with their seeds, for the judge to check.
    Returns label -> {"ms", "wall_ms", "mode"} (+ "spots": [(seed, output)] for the candidate), or
    {"error": why} for a baseline that failed to run."""
    from harness.guard import poison, reset_persisting_l2
    rng = random.SystemRandom()                # not reproducible on purpose: the candidate cannot predict it
    device = next(x.device for x in sets[0] if isinstance(x, torch.Tensor))
    flush = _Flusher(device)
    dropped = {}
    for label, fn in list(sides.items()):     # warm-up: compilation, caches, handles; a varying number of calls
        try:
            for _ in range(rng.randint(1, 3)):
                for args in sets:
                    poison(fn(*args))
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a baseline this GPU or torch lacks is dropped, with the reason
            if label == "candidate":
                raise
            dropped[label] = f"{type(exc).__name__}: {exc}"[:500]
            del sides[label]
    probe = {label: statistics.median(_probe(fn, sets, flush)) for label, fn in sides.items()}
    use_graphs = min(probe.values()) < GRAPH_BELOW_MS
    runners = {label: (_graphs_for(fn, sets) if use_graphs else None, fn) for label, fn in sides.items()}
    if any(graphs is None for graphs, _ in runners.values()):
        # One side not capturable: time every side with plain events, or launch overhead would favour one side.
        runners = {label: (None, fn) for label, fn in sides.items()}
    # Fit the repetitions into the budget (the slowest side dominates); vary the count so phases look alike.
    per_rep_ms = sum(probe.values()) + 0.1 * len(sides)
    reps = max(min_reps, min(int(reps * rng.uniform(0.8, 1.2)), int(budget_s * 1e3 / max(per_rep_ms, 1e-3))))
    spot_reps = set(rng.sample(range(reps), min(spots, reps)))
    events = {label: [] for label in sides}
    walls = {label: [] for label in sides}
    kept = []
    for rep in range(reps):
        order = list(sides)
        rng.shuffle(order)
        for label in order:
            graphs, fn = runners[label]
            k = rng.randrange(len(sets))
            seed = []

            def before(k=k, seed=seed):
                reset_persisting_l2()
                if refill is not None:
                    seed.append(refill(k))

            run = (lambda g=graphs[k][0], o=graphs[k][1]: (g.replay(), o)[1]) if graphs else \
                (lambda a=sets[k], f=fn: f(*a))
            start, end, wall, out = _call_time(run, flush, before)
            events[label].append((start, end))
            walls[label].append(wall)
            if label == "candidate" and rep in spot_reps:
                kept.append((seed[0] if seed else None, out.clone() if isinstance(out, torch.Tensor) else out))
            if not graphs:
                poison(out)
            del out
    torch.cuda.synchronize()
    result = {label: {"ms": [s.elapsed_time(e) for s, e in events[label]], "wall_ms": walls[label],
                      "mode": "graph" if runners[label][0] else "events"}
              for label in sides}
    result["candidate"]["spots"] = kept
    result.update({label: {"error": why} for label, why in dropped.items()})
    return result


def _probe(fn, sets, flush, n=3):
    out = []
    for i in range(n):
        start, end, _, _ = _call_time(lambda a=sets[i % len(sets)]: fn(*a), flush)
        out.append(start.elapsed_time(end))
    return out


def measure_peaks(device, dtypes: dict) -> dict:
    """The ceilings on this card, measured now: cuBLAS matmul rate per dtype at 8192^3 and copy bandwidth."""
    peaks = {}
    flush = _Flusher(device)
    n = 8192
    for name, (dtype, tf32) in dtypes.items():
        if dtype == torch.int8:
            # cuBLASLt int8 in its fast layout (B column-major): the ceiling int8 kernels are held to.
            a = torch.randint(-128, 128, (n, n), dtype=torch.int8, device=device)
            b = torch.randint(-128, 128, (n, n), dtype=torch.int8, device=device).t()
            try:
                torch._int_mm(a, b)
                ms = statistics.median(_probe(lambda: torch._int_mm(a, b), [()], flush, n=5))
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
            ms = statistics.median(_probe(lambda: torch.matmul(a, b), [()], flush, n=5))
            peaks[name] = {"tflops": 2 * n**3 / ms / 1e9}
            del a, b
        finally:
            torch.set_float32_matmul_precision(before)
    src = torch.empty(1 << 28, dtype=torch.int32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    ms = statistics.median(_probe(lambda: dst.copy_(src), [()], flush, n=10))
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
        ms = statistics.median(_probe(run, [()], flush, n=5))
        return {"tflops": 2 * n**3 / ms / 1e9, "note": "fp8 e4m3 via torch._scaled_mm"}
    except Exception as exc:  # noqa: BLE001 - no fp8 GEMM here: no compute ceiling, say why
        return {"tflops": None, "note": f"fp8 peak not measured: {type(exc).__name__}"}
