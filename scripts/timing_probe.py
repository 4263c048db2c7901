"""Where does a timing method's ratio come from, and does the timed window hold? Usage, on a GPU machine:

    python scripts/timing_probe.py [M N K]                 the ratio probe below (bf16)
    python scripts/timing_probe.py --window --out DIR      the window checks (issue 16, item 2), results in
                                                           DIR/window.jsonl as they come

The ratio probe: one process, one shape, candidate gemm/triton_tiled against torch.matmul, each condition
interleaved call by call: the harness's held loop with and without the profiler, with and without the L2 flush;
do_bench_cudagraph.

The window checks: (1) the hold's geometry, and whether a kernel launched on an unordered side stream during the hold
starts before the hold ends, for torch.cuda._sleep (the old hold, one SM) and gauntlet.gpu.hold; (2) the output snapshot
reproduces values and strides; (3) the window's margins (gauntlet.judge.timing.window) over honest timed calls of
triton_tiled and cuBLAS and of the window fixtures, in process; (4) the ratio probe at 4096^3; (5) gemm/triton_tiled
judged with timing at 4096^3 (as `gauntlet eval gemm triton_tiled --dtype bfloat16 --examples 2 --max-shapes 1`), and
the window fixtures (tests/bad, tests/good) judged with timing at 4096^3, for their verdicts and speedups."""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton.testing as tt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gauntlet import discover  # noqa: E402
from gauntlet.child.timing import Bench  # noqa: E402
from gauntlet.inputs import make_inputs  # noqa: E402
from gauntlet.problem import load_module  # noqa: E402


def main() -> None:
    m, n, k = (int(x) for x in sys.argv[1:4]) if len(sys.argv) >= 4 else (4096, 4096, 4096)
    res = ratios(m, n, k)
    print(f"{m}x{n}x{k} bf16, {torch.cuda.get_device_name()}")
    for c, r in res.items():
        wall = f"  wall/call {r['wall_ms']:.2f} ms" if r.get("wall_ms") else ""
        print(f"  {c:<30} triton {r['triton']:.4f} ms  cublas {r['cublas']:.4f} ms  ratio {r['ratio']:.4f}{wall}")


def ratios(m: int, n: int, k: int, rounds: int = 30) -> dict:
    """{condition: {"triton": median ms, "cublas": median ms, "ratio": cublas / triton, "wall_ms"}}."""
    from gauntlet.gpu import HOLD_MS
    problem = discover.get_problem("gemm")
    spec = problem.dtype("bfloat16")
    tiled = load_module(ROOT / "solutions" / "gemm" / "triton_tiled.py", "probe_triton_tiled")
    make = lambda seed: make_inputs(problem, {"M": m, "N": n, "K": k}, spec, seed, "cuda")  # noqa: E731
    sides = {"triton": Bench(tiled.solve, make), "cublas": Bench(torch.matmul, make)}
    for b in sides.values():
        b.warm()
    conditions = {"held+profiler": dict(profile=True), "held, no profiler": dict(profile=False)}
    res = {c: {s: [] for s in sides} for c in conditions}
    walls = {c: [] for c in conditions}
    noflush = {s: [] for s in sides}
    for _ in range(rounds):
        for c, kw in conditions.items():
            for s, b in sides.items():
                t0 = time.perf_counter()
                res[c][s] += b.batch(5, HOLD_MS, keep=False, **kw)["ms"]
                walls[c].append((time.perf_counter() - t0) * 1e3 / 5)
        for s, b in sides.items():                       # held, no profiler, no flush
            real = b.flush
            b.flush = lambda: None
            noflush[s] += b.batch(5, HOLD_MS, keep=False, profile=False)["ms"]
            b.flush = real
    res["held, no profiler, no flush"] = noflush
    a, bb = make(1)
    res["do_bench_cudagraph"] = {"triton": [tt.do_bench_cudagraph(lambda: tiled.solve(a, bb), rep=300)],
                                 "cublas": [tt.do_bench_cudagraph(lambda: torch.matmul(a, bb), rep=300)]}
    out = {}
    for c, r in res.items():
        t, cb = statistics.median(r["triton"]), statistics.median(r["cublas"])
        out[c] = {"triton": t, "cublas": cb, "ratio": cb / t,
                  "wall_ms": statistics.median(walls[c]) if c in walls else None}
    return out


# --- the window checks ------------------------------------------------------------------------------------------

FIXTURES = ["good/side_stream_beside_the_hold", "good/slow_launch_for_a_longer_hold",
            "bad/defers_work_past_the_end_event", "bad/completes_output_on_sigcont"]


def _emit(out: Path, doc: dict) -> None:
    print(json.dumps(doc), flush=True)
    with open(out / "window.jsonl", "a") as fh:
        fh.write(json.dumps(doc) + "\n")


def _load(rel: str, name: str):
    return load_module(ROOT / "tests" / f"{rel}.py", name)


def hold_check() -> dict:
    """Does a kernel on an unordered side stream start before the hold ends? Old hold and new, 5 trials each."""
    from gauntlet import gpu
    from gauntlet.child.profiling import CallProfiler
    geometry = gpu.kernels().geometry
    side = torch.cuda.Stream()
    x = torch.zeros(1 << 16, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1 << 22)
    end.record()
    torch.cuda.synchronize()
    cycles_per_ms = (1 << 22) / start.elapsed_time(end)
    res = {"geometry": geometry, "sleep_cycles_per_ms": round(cycles_per_ms)}
    for label in ("old: torch.cuda._sleep", "new: gauntlet.gpu.hold"):
        margins, lengths = [], []
        for _ in range(5):
            torch.cuda.synchronize()
            with CallProfiler("cuda") as prof:
                if label.startswith("old"):
                    torch.cuda._sleep(int(2.0 * cycles_per_ms))
                else:
                    gpu.hold(2.0)
                with torch.cuda.stream(side):          # not ordered after the caller's stream
                    x.add_(1)
                torch.cuda.synchronize()
            seen = prof.observed()
            rows = list(zip([k[0] for k in seen["kernels"]], seen["spans"]))
            hold_row = next(s for n, s in rows if "spin_kernel" in n or n == gpu.HOLD_KERNEL)
            side_row = next(s for n, s in rows if "spin_kernel" not in n and n != gpu.HOLD_KERNEL)
            margins.append((side_row[0] - hold_row[1]) / 1e3)
            lengths.append((hold_row[1] - hold_row[0]) / 1e6)
        res[label] = {"side_start_minus_hold_end_us": [round(m, 2) for m in margins],
                      "hold_ms": [round(v, 4) for v in lengths]}
    return res


def snapshot_check() -> dict:
    from gauntlet import gpu
    t = torch.randn(1000, 1003, device="cuda").to(torch.bfloat16)
    views = {"contiguous": t, "transposed": t.t(), "offset": t[1:, 3:], "strided": t[:, ::2],
             "expanded": torch.randn(7, device="cuda").expand(5, 7), "odd_bytes": torch.randn(7, device="cuda")[1:]}
    out = {}
    for name, v in views.items():
        snap, n = gpu.snapshot(v)
        torch.cuda.synchronize()
        out[name] = bool(torch.equal(snap, v) and snap.stride() == v.stride() and snap.data_ptr() != v.data_ptr()
                         and n == 1)
    return out


def window_margins(m: int, n: int, k: int, calls: int = 40) -> dict:
    """Every timed call of each side through Bench.batch, judged by gauntlet.judge.timing.window as the parent would."""
    from gauntlet.child.timing import Bench
    from gauntlet.gpu import HOLD_MS
    from gauntlet.judge.timing import window
    problem = discover.get_problem("gemm")
    spec = problem.dtype("bfloat16")
    make = lambda seed: make_inputs(problem, {"M": m, "N": n, "K": k}, spec, seed, "cuda")  # noqa: E731
    fns = {"triton_tiled": load_module(ROOT / "solutions" / "gemm" / "triton_tiled.py", "w_tiled").solve,
           "cublas": torch.matmul}
    for rel in FIXTURES:
        fns[rel] = _load(rel, "w_" + rel.replace("/", "_")).solve
    res = {}
    for label, fn in fns.items():
        try:
            b = Bench(fn, make)
            b.warm()
            problems, margins, ms, shown = [], [], [], []
            for _ in range(calls // 5):
                batch = b.batch(5, HOLD_MS, keep=False)
                for call, t in zip(batch["calls"], batch["ms"]):
                    found, mg = window.check(call, t)
                    problems += found[:1]
                    margins.append(mg)
                    ms.append(t)
                    if found and len(shown) < 2:     # the timeline of a call outside its window, for the record
                        shown.append({"ms": t, "rows": [[k[0][:40], round(a / 1e3, 2), round(e / 1e3, 2)]
                                                        for k, (a, e) in zip(call["kernels"], call["spans"])][:12]})
            starts = [x["start_us"] for x in margins if x["start_us"] is not None]
            ends = [x["end_us"] for x in margins if x["end_us"] is not None]
            res[label] = {"calls": len(margins), "outside": len(problems), "first": problems[:1],
                          "start_margin_us": [min(starts), statistics.median(starts)] if starts else None,
                          "end_margin_us": [min(ends), statistics.median(ends)] if ends else None,
                          "marker_gap_us_max": max(x["marker_after_end_us"] for x in margins),
                          "start_after_hold_us": [statistics.median(x["start_after_hold_us"] for x in margins),
                                                  max(x["start_after_hold_us"] for x in margins)],
                          "median_ms": statistics.median(ms), "timelines": shown}
            del b
        except Exception as exc:  # noqa: BLE001
            res[label] = {"error": f"{type(exc).__name__}: {exc}"[:600]}
        torch.cuda.empty_cache()
    return res


def judged(path: str, budget: float, examples: int = 2, max_edges: int | None = None, peaks=None) -> dict:
    from gauntlet.judge.evaluate import Options, evaluate
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", path)
    bench = next(b for b in problem.benchmark if (b["M"], b["N"], b["K"]) == (4096, 4096, 4096))
    opts = Options(device="cuda", dtypes=("bfloat16",), examples=examples, shrink=False, shapes=[bench],
                   timing_budget_s=budget, max_edges=max_edges, peaks=peaks or {})
    t0 = time.time()
    rec = evaluate(problem, solution, opts).to_json()
    t = (rec.get("timings") or [{}])[0]
    base = t.get("baselines", {}).get("cublas", {})
    return {"verdict": rec["verdict"], "codes": sorted({r["code"] for r in rec["reasons"]}),
            "details": [r["detail"][:400] for r in rec["reasons"]][:2], "ms": t.get("candidate_ms"),
            "host_ms": t.get("candidate_host_ms"), "hold_ms": t.get("hold_ms"), "speedup": base.get("speedup"),
            "ci95": base.get("ci95"), "window_us": t.get("window_us"), "base_window_us": base.get("window_us"),
            "reps": t.get("reps"), "elapsed_s": round(time.time() - t0, 1)}


def window_main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    _emit(out, {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda})
    for name, step in (("hold", hold_check), ("snapshot", snapshot_check),
                       ("margins_4096", lambda: window_margins(4096, 4096, 4096))):
        t0 = time.time()
        try:
            _emit(out, {"step": name, "result": step(), "s": round(time.time() - t0, 1)})
        except Exception as exc:  # noqa: BLE001
            _emit(out, {"step": name, "error": f"{type(exc).__name__}: {exc}"[:1500]})
    t0 = time.time()
    try:
        _emit(out, {"step": "ratio_4096", "result": ratios(4096, 4096, 4096, rounds=20), "s": round(time.time() - t0, 1)})
    except Exception as exc:  # noqa: BLE001
        _emit(out, {"step": "ratio_4096", "error": f"{type(exc).__name__}: {exc}"[:1500]})
    try:
        _emit(out, {"step": "eval triton_tiled", "result": judged("triton_tiled", 15.0)})
    except Exception as exc:  # noqa: BLE001
        _emit(out, {"step": "eval triton_tiled", "error": f"{type(exc).__name__}: {exc}"[:1500]})
    for rel in FIXTURES:
        try:
            _emit(out, {"step": f"eval {rel}", "result": judged(str(ROOT / "tests" / f"{rel}.py"), 4.0,
                                                                 max_edges=2)})
        except Exception as exc:  # noqa: BLE001
            _emit(out, {"step": f"eval {rel}", "error": f"{type(exc).__name__}: {exc}"[:1500]})


if __name__ == "__main__":
    if "--window" in sys.argv:
        window_main(Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("."))
    else:
        main()
