"""Config sweep for gemm/triton_persistent's few-row kernel (M <= 256) on one GPU: every (tile, stages, warps, K
slices) variant timed as a CUDA graph (triton.testing.do_bench_cudagraph: the GPU's time alone; Gauntlet's held
window hides the host's launches the same way) against cuBLAS on the same inputs, its error against an fp32 product
checked, one JSON line per variant as it comes, and a table of the shipped rule against the best variant at the end,
with each side's host time a call (what a timing without a hold or a graph would also count).

This is the measurement behind `_splitk_config` in solutions/gemm/triton_persistent.py. It is not Gauntlet's figure:
`gauntlet eval gemm triton_persistent` times the chosen config against cuBLAS in clean worker processes. Usage (on a
GPU machine): python scripts/sweep_decode.py --out results/sweep_decode.jsonl [--seconds 170]
"""
from __future__ import annotations

import argparse
import itertools
import json
import time

import torch
import triton
from triton.testing import do_bench_cudagraph

from sweep_configs import load      # scripts/ is this script's first path entry

SHAPES = [(128, 14336, 4096), (128, 4096, 14336), (256, 4096, 4096), (64, 14336, 4096), (16, 4096, 4096)]


def graph_ms(fn) -> float:
    fn()
    torch.cuda.synchronize()
    return do_bench_cudagraph(fn, rep=30)


def host_us(fn, n: int = 200) -> float:
    """The host's time a call, launches only (no sync inside the loop)."""
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    took = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return took


def variants(M: int, K: int):
    for bm, bn, bk, stages, S in itertools.product((16, 32, 64, 128), (64, 128), (64, 128), (3, 4, 5), (1, 2, 4, 6)):
        if bm > max(16, triton.next_power_of_2(M)) or (bm + bn) * bk * 2 * stages > 220 * 1024:
            continue
        if triton.cdiv(K, bk) < 2 * S:
            continue
        for warps in ((4, 8) if bm * bn >= 128 * 128 else (4,)):
            yield bm, bn, bk, warps, stages, S


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=170.0, help="stop trying variants after this long")
    args = p.parse_args(argv)
    pers = load("solutions/gemm/triton_persistent.py")
    card = pers._card(torch.device("cuda", torch.cuda.current_device()))
    t0, rows = time.time(), []
    with open(args.out, "a") as fh:
        def emit(**row):
            fh.write(json.dumps(row) + "\n")
            fh.flush()
        emit(gpu=torch.cuda.get_device_name(), card=card, torch=torch.__version__, triton=triton.__version__)
        for M, N, K in SHAPES:
            a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
            ref = a.float() @ b.float()
            cublas = graph_ms(lambda: torch.matmul(a, b))
            rule = pers._splitk_config(M, N, K, *card)
            shipped = graph_ms(lambda: pers.solve(a, b))
            emit(shape=[M, N, K], variant="rule", config=rule, ms=shipped, cublas_ms=cublas, vs_cublas=cublas / shipped)
            c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            best = None
            for cfg in variants(M, K):
                if time.time() - t0 > args.seconds:
                    break
                try:
                    fn = lambda: pers._splitk(a, b, c, card, cfg)  # noqa: E731
                    fn()
                    torch.cuda.synchronize()
                    err = float((c.float() - ref).abs().max())
                    ms = graph_ms(fn)
                except Exception as exc:          # a config that does not compile is a data point, not a stop
                    emit(shape=[M, N, K], config=cfg, error=f"{type(exc).__name__}: {str(exc)[:200]}")
                    continue
                emit(shape=[M, N, K], config=cfg, ms=ms, vs_cublas=cublas / ms, err=err)
                if best is None or ms < best[0]:
                    best = (ms, cfg)
            rows.append((M, N, K, rule, cublas / shipped, best, host_us(lambda: torch.matmul(a, b)),
                         host_us(lambda: pers.solve(a, b)), cublas))
    print("shape | rule | rule vs cuBLAS | best variant | best vs cuBLAS | host us a call: cuBLAS, solve")
    for M, N, K, rule, r, best, h_cublas, h_solve, cublas in rows:
        b = f"{best[1]} | {cublas / best[0]:.3f}" if best else "- | -"
        print(f"{M}x{N}x{K} | {rule} | {r:.3f} | {b} | {h_cublas:.0f}, {h_solve:.0f}")


if __name__ == "__main__":
    main()
