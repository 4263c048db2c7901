"""The outside clock (gauntlet.judge.timing.outside) on a GPU, at gemm 4096^3 bf16. Usage, on a GPU machine:

    python scripts/outside_clock_probe.py --out DIR        results in DIR/outside.jsonl as they come, a table last

1. gemm/triton_tiled and cuBLAS against itself (solutions/gemm/torch_matmul.py), judged with timing as the suite
   does (default budget): verdict, speedup and interval, what the outside clock saw against what the events
   reported, and the seconds it added to the shape (its spans, `phases_s.outside_clock`; its proofs are judged in
   `spot_checks` beside the timed spots);
2. triton.testing.do_bench_cudagraph of both on one input set: the harness's speedup against it (fidelity);
3. the fixture tests/bad/scales_reported_times.py judged with the bound switched off in this process: the negative
   control (no other check catches it: it passes, faster than it is), and with the bound on (also the `gpu` corpus
   test, tests/test_corpus_extra.py);
4. where a span's fixed cost goes (`span_costs`)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton.testing as tt

ROOT = Path(__file__).resolve().parents[1]

from gauntlet import discover  # noqa: E402
from gauntlet.inputs import make_inputs  # noqa: E402
from gauntlet.judge.evaluate import Options, evaluate  # noqa: E402
from gauntlet.judge.timing import outside  # noqa: E402
from gauntlet.problem import load_module  # noqa: E402

SHAPE = {"M": 4096, "N": 4096, "K": 4096}


def judge(path: Path, budget_s: float = 15.0) -> dict:
    problem = discover.get_problem("gemm")
    bench = next(b for b in problem.benchmark if all(b[d] == SHAPE[d] for d in SHAPE))
    opts = Options(device="cuda", dtypes=("bfloat16",), examples=5, shrink=False, timing=True, shapes=[bench],
                   timing_budget_s=budget_s)
    t0 = time.perf_counter()
    record = evaluate(problem, discover.get_solution("gemm", str(path)), opts).to_json()
    t = (record.get("timings") or [{}])[0]
    base = (t.get("baselines") or {}).get("cublas", {})
    clock = t.get("outside_clock") or {}
    return {"verdict": record["verdict"], "reasons": [f"[{r['code']}] {r['detail'][:300]}" for r in record["reasons"]],
            "speedup": base.get("speedup"), "ci95": base.get("ci95"), "cand_ms": t.get("candidate_ms"),
            "base_ms": base.get("ms"), "outside_clock": clock, "phases_s": t.get("phases_s"),
            "judge_s": round(time.perf_counter() - t0, 2)}


def cudagraph() -> dict:
    problem = discover.get_problem("gemm")
    a, b = make_inputs(problem, SHAPE, problem.dtype("bfloat16"), 1, "cuda")
    tiled = load_module(ROOT / "solutions" / "gemm" / "triton_tiled.py", "probe_triton_tiled")
    t = tt.do_bench_cudagraph(lambda: tiled.solve(a, b), rep=300)
    c = tt.do_bench_cudagraph(lambda: torch.matmul(a, b), rep=300)
    return {"triton_ms": t, "cublas_ms": c, "ratio": c / t}


def span_costs(repeats: int = 5) -> dict:
    """Where a span's fixed cost goes, in process (cuBLAS at the shape): the refill from the judge's seed, a span of
    one call behind a 2 ms hold (refill included), and the last output's copy to the host for the reply (ms)."""
    from gauntlet import protocol
    from gauntlet.child.timing import Bench
    problem = discover.get_problem("gemm")
    make = lambda seed: make_inputs(problem, SHAPE, problem.dtype("bfloat16"), seed, "cuda")  # noqa: E731
    bench = Bench(torch.matmul, make)
    bench.warm()
    out = {"refill": [], "span_1_call_2ms_hold": [], "to_wire": []}
    for i in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        bench.refill(0, i)
        torch.cuda.synchronize()
        out["refill"].append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        _, _, snap, _ = bench.span(1, 2.0, i)
        out["span_1_call_2ms_hold"].append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        protocol.tensor_to_wire(snap)
        out["to_wire"].append((time.perf_counter() - t0) * 1e3)
    return {k: round(min(v), 3) for k, v in out.items()}


def span_noise(sizes=(25, 125), repeats=5, hold_ms=15.0) -> dict:
    """The spans timed in process (cuBLAS; no request, no reply): each size's times (ms, less the hold), to tell the
    noise of the GPU and the worker's host from that of the request path."""
    from gauntlet.child.timing import Bench
    problem = discover.get_problem("gemm")
    make = lambda seed: make_inputs(problem, SHAPE, problem.dtype("bfloat16"), seed, "cuda")  # noqa: E731
    bench = Bench(torch.matmul, make)
    bench.warm()
    out = {n: [] for n in sizes}
    for r in range(repeats):
        for n in sizes:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            bench.span(n, hold_ms, r)
            out[n].append(round((time.perf_counter() - t0) * 1e3 - hold_ms, 3))
    n1, n2 = sizes
    slopes = [(b - a) / (n2 - n1) for a, b in zip(out[n1], out[n2])]
    return {"times": {str(n): v for n, v in out.items()}, "slopes": [round(x, 5) for x in slopes],
            "min_slope": round((min(out[n2]) - min(out[n1])) / (n2 - n1), 5)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--control", action="store_true", help="also judge the fixture with the bound switched off")
    ap.add_argument("--quick", action="store_true", help="the judgements only (no do_bench, no in-process spans)")
    out = ap.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    res = {}

    def emit(name, doc):
        res[name] = doc
        print(json.dumps({name: doc}), flush=True)
        with open(out / "outside.jsonl", "a") as fh:
            fh.write(json.dumps({name: doc}) + "\n")

    emit("triton_tiled", judge(ROOT / "solutions" / "gemm" / "triton_tiled.py"))
    emit("cublas_self", judge(ROOT / "solutions" / "gemm" / "torch_matmul.py"))
    if "--quick" not in sys.argv:
        emit("do_bench_cudagraph", cudagraph())
        emit("span_costs_ms", span_costs())
        emit("span_noise_in_process", span_noise())
    emit("fixture", judge(ROOT / "tests" / "bad" / "scales_reported_times.py", budget_s=4.0))
    if "--control" in sys.argv:
        outside.bound = lambda *a, **k: []      # the negative control: the bound off, in this process only
        emit("fixture_without_bound", judge(ROOT / "tests" / "bad" / "scales_reported_times.py", budget_s=4.0))
    print(f"{'run':<24}{'verdict':<11}{'speedup':>8}  {'reported':>9}{'seen':>9}{'allowed':>9}{'added s':>8}")
    for name, r in res.items():
        if "ratio" not in r and "verdict" not in r:
            print(f"{name:<24}{r}")
            continue
        if "verdict" not in r:
            print(f"{name:<24}ratio {r['ratio']:.4f} (triton {r['triton_ms']:.4f} ms, cublas {r['cublas_ms']:.4f} ms)")
            continue
        c = r["outside_clock"]
        print(f"{name:<24}{r['verdict']:<11}{r['speedup'] or 0:>8.4f}  {r['cand_ms'] or 0:>9.4f}"
              f"{c.get('seen_ms') or 0:>9.4f}{c.get('allowed_ms') or 0:>9.4f}"
              f"{(r['phases_s'] or {}).get('outside_clock', 0):>8.3f}")


if __name__ == "__main__":
    sys.exit(main())
