"""Where does a timing method's ratio come from? One process, one shape, candidate gemm/triton_tiled against
torch.matmul, each condition interleaved call by call: the harness's held loop with and without the profiler, with
and without the L2 flush; do_bench_cudagraph. Usage: python scripts/timing_probe.py [M N K] (bf16)."""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch
import triton.testing as tt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import discover  # noqa: E402
from harness.child.timing import Bench  # noqa: E402
from harness.inputs import make_inputs  # noqa: E402
from harness.problem import load_module  # noqa: E402


def main() -> None:
    m, n, k = (int(x) for x in sys.argv[1:4]) if len(sys.argv) >= 4 else (4096, 4096, 4096)
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
    for _ in range(30):
        for c, kw in conditions.items():
            for s, b in sides.items():
                t0 = time.perf_counter()
                res[c][s] += b.batch(5, 1.0, keep=False, **kw)["ms"]
                walls[c].append((time.perf_counter() - t0) * 1e3 / 5)
        for s, b in sides.items():                       # held, no profiler, no flush
            real = b.flush
            b.flush = lambda: None
            noflush[s] += b.batch(5, 1.0, keep=False, profile=False)["ms"]
            b.flush = real
    res["held, no profiler, no flush"] = noflush
    a, bb = make(1)
    res["do_bench_cudagraph"] = {"triton": [tt.do_bench_cudagraph(lambda: tiled.solve(a, bb), rep=300)],
                                 "cublas": [tt.do_bench_cudagraph(lambda: torch.matmul(a, bb), rep=300)]}
    print(f"{m}x{n}x{k} bf16, {torch.cuda.get_device_name()}")
    for c, r in res.items():
        t, cb = statistics.median(r["triton"]), statistics.median(r["cublas"])
        wall = f"  wall/call {statistics.median(walls[c]):.2f} ms" if c in walls else ""
        print(f"  {c:<30} triton {t:.4f} ms  cublas {cb:.4f} ms  ratio {cb / t:.4f}{wall}")


if __name__ == "__main__":
    main()
