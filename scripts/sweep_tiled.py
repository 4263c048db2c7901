"""Tile sweep for the one-program-per-tile Triton solutions (bmm, gemm_layouts, gemm_bias_gelu, attn_scores,
attn_output) and the persistent TMA paths of the first three (their `_tma_config`; the variant "tiled" turns the path
off) on one GPU: at each benchmark shape of the problem, each tile configuration timed with
triton.testing.do_bench against the problem's first baseline on the same inputs (the problem's own make_inputs, so
the views and strides are the judged ones), the output checked against that baseline's. One JSON line per (shape,
variant) written as it comes, a table at the end.

This is the measurement behind the tile rules in those solutions' `_config`; it is not Gauntlet's figure (`gauntlet
eval` times the chosen config against the baseline in clean worker processes). Usage (on a GPU machine):
    python scripts/sweep_tiled.py --out results/tiled.jsonl [--only bmm,layouts,...] [--dtype bfloat16]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time

import torch
import triton
import yaml

from sweep_configs import ROOT, bench, emit, load, rel_err, variant

# (bm, bn, bk, warps, stages) for the 5-tuple configs; the attention kernels take their own tuples (below).
GEMM_CFGS = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (128, 128, 64, 8, 4),
             (128, 128, 64, 4, 4), (128, 128, 64, 8, 3), (128, 128, 128, 8, 2), (64, 256, 64, 4, 4),
             (128, 64, 64, 4, 4), (64, 128, 64, 4, 5)]
FP32_CFGS = [(64, 128, 32, 4, 3), (128, 128, 32, 8, 3), (128, 64, 32, 4, 3), (64, 64, 32, 4, 4),
             (128, 128, 16, 8, 4), (64, 128, 16, 4, 4)]
SCORES_CFGS = [(128, 128, 64, 8, 2), (128, 128, 64, 8, 3), (128, 128, 128, 8, 2), (128, 256, 64, 8, 2),
               (64, 128, 64, 4, 3), (128, 64, 64, 4, 3), (64, 256, 64, 8, 2), (256, 128, 64, 8, 2)]
SCORES_FP32 = [(64, 64, 32, 4, 2), (64, 64, 32, 4, 3), (64, 128, 32, 4, 3), (128, 64, 32, 4, 3),
               (128, 128, 32, 8, 3), (64, 128, 16, 4, 4)]
OUTPUT_CFGS = [(128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3), (64, 64, 4, 4), (64, 128, 4, 3),
               (128, 32, 8, 4), (64, 64, 4, 6)]
# the persistent TMA path of bmm and gemm_layouts: (bm, bn, bk, warps, stages, split store)
TMA_CFGS = [(128, 256, 64, 8, 3, True), (128, 256, 64, 8, 4, False), (128, 128, 64, 8, 4, True),
            (128, 128, 64, 4, 4, True), (128, 128, 64, 8, 6, False), (128, 64, 64, 4, 6, False)]
# bmm's short-K shapes: two or three programs an SM (smaller stages), one 128-deep K step
BMM_TMA_EXTRA = [(128, 128, 64, 4, 2, True, 2), (128, 128, 64, 8, 2, True, 2), (128, 128, 64, 4, 3, True, 2),
                 (64, 256, 64, 4, 2, True, 2), (128, 64, 64, 4, 3, False, 3), (128, 256, 128, 8, 2, True, 1),
                 (128, 128, 128, 8, 2, True, 1), (128, 128, 64, 8, 3, False, 2)]
# the persistent TMA path on TF32 (fp32 data, 32-element K steps); bmm's take a programs-per-SM field too
TMA_TF32 = [(128, 256, 32, 8, 3, True), (128, 256, 32, 8, 2, True), (128, 128, 32, 8, 4, True),
            (128, 128, 32, 4, 4, True), (128, 128, 32, 8, 3, False), (128, 64, 32, 4, 4, False)]
OUTPUT_FP32 = [(64, 16, 8, 3), (64, 32, 4, 3), (64, 16, 4, 4), (32, 32, 4, 4), (128, 16, 8, 3)]

# name: (problem, solution file, kernel, config tuple -> variant kwargs)
TARGETS = {
    "bmm": ("bmm", "solutions/bmm/triton_tiled.py", "_bmm_kernel"),
    "layouts": ("gemm_layouts", "solutions/gemm_layouts/triton_tiled.py", "_gemm_kernel"),
    "gelu": ("gemm_bias_gelu", "solutions/gemm_bias_gelu/triton_fused.py", "_linear_gelu_kernel"),
    "scores": ("attn_scores", "solutions/attn_scores/triton_gqa.py", "_scores_kernel"),
    "output": ("attn_output", "solutions/attn_output/triton_gqa.py", "_pv_kernel"),
}


def variants_for(name, dtype, tf32=False):
    """{variant: dict(config=..., **kernel meta overrides)}: config replaces the solution's _config result."""
    out = {"default": {}}
    if name in ("bmm", "layouts") and tf32:                             # the persistent path, then the tiled one
        for c in (TMA_TF32 if name == "layouts" else [(*c, 1) for c in TMA_TF32] + [(128, 128, 32, 8, 2, True, 2)]):
            out["tma_%dx%dx%d_w%d_s%d_split%d" % c[:6] + ("_x%d" % c[6] if len(c) > 6 else "")] = \
                dict(config=c, config_name="_tma_config")
        out["tiled"] = dict(config=False, config_name="_persistent")
        if name == "layouts":                   # decode (M <= PERSISTENT_MIN_M): the tiled kernel's TF32 tiles
            out["persistent_from_64_rows"] = dict(patch={"PERSISTENT_MIN_M": 63})
            for c in [(64, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 64, 32, 4, 6), (128, 128, 32, 8, 3),
                      (64, 256, 32, 8, 3), (64, 64, 64, 4, 4)]:
                out["tiled_%dx%dx%d_w%d_s%d" % c] = dict(config=lambda base, c=c: c, _also_tiled=True)
    elif name == "scores" and dtype == torch.float32:
        out["no_copy"] = dict(config=False, config_name="_copy_keys")
        for c in SCORES_FP32[2:5]:
            out["%dx%dx%d_w%d_s%d" % c] = dict(config=c)
    elif name in ("bmm", "layouts", "gelu") and dtype != torch.float32:   # the persistent path, then the tiled one
        for c in (TMA_CFGS if name == "layouts" else [(*c, 1) for c in TMA_CFGS] + BMM_TMA_EXTRA):
            out["tma_%dx%dx%d_w%d_s%d_split%d" % c[:6] + ("_x%d" % c[6] if len(c) > 6 else "")] = \
                dict(config=c, config_name="_tma_config")
        out["tiled"] = dict(config=False, config_name="_persistent")
        for c in GEMM_CFGS[:3]:
            out["tiled_%dx%dx%d_w%d_s%d" % c] = dict(config=lambda base, c=c: c, _also_tiled=True)
    elif name in ("bmm", "layouts", "gelu"):
        for c in (FP32_CFGS if dtype == torch.float32 else GEMM_CFGS):
            out["%dx%dx%d_w%d_s%d" % c] = dict(config=lambda base, c=c: c)
        out["g16"] = dict(GROUP_M=16)
    elif name == "scores":              # _config -> (bm, bn, bk, warps, stages)
        for c in (SCORES_FP32 if dtype == torch.float32 else SCORES_CFGS):
            out["%dx%dx%d_w%d_s%d" % c] = dict(config=c)
    else:                               # _config -> (bm, bk, warps)
        for c in (OUTPUT_FP32 if dtype == torch.float32 else OUTPUT_CFGS):
            out["%dx%d_w%d_s%d" % c] = dict(config=lambda base, c=c: c[:3], num_stages=c[3])
    return out


def sweep(fh, name, dtype, shapes_only=None, tf32=False):
    problem, path, kernel = TARGETS[name]
    spec = yaml.safe_load((ROOT / "problems" / problem / "problem.yaml").read_text())
    ref_mod = load(f"problems/{problem}/reference.py")
    base_name = next(iter(spec["baselines"].values()))
    base = load(f"solutions/{problem}/{base_name}.py")
    mod = load(path)
    for i, sh in enumerate(spec["benchmark"]):
        if shapes_only is not None and i not in shapes_only:
            continue
        shape = {k: v for k, v in sh.items() if k != "source"}
        inputs = ref_mod.make_inputs(shape, dtype, 1234, "cuda")
        want = base.solve(*inputs)
        t_base = bench(lambda: base.solve(*inputs))
        bench(lambda: mod.solve(*inputs))     # warm-up: the first variant timed at a shape otherwise reads slow
        for vname, v in variants_for(name, dtype, tf32).items():
            v = dict(v)
            cfg = v.pop("config", None)
            cname = v.pop("config_name", "_config")
            tiled_only = v.pop("_also_tiled", False)
            patch = v.pop("patch", {})
            saved = {k: getattr(mod, k) for k in patch if hasattr(mod, k)}
            for k, val in patch.items():
                if k in saved:
                    setattr(mod, k, val)
            try:
                with variant(mod, [kernel], cfg, config_name=cname, **v), \
                        variant(mod, [], False, config_name="_persistent") if tiled_only else contextlib.nullcontext():
                    err = rel_err(mod.solve(*inputs), want)
                    t = bench(lambda: mod.solve(*inputs))
                row = dict(problem=name, dtype="tf32" if tf32 else str(dtype)[6:], shape=shape, variant=vname,
                           err=err, ms=t, base_ms=t_base, vs_base=t_base / t)
            except Exception as exc:          # a config that does not compile is a data point, not a stop
                row = dict(problem=name, dtype=str(dtype)[6:], shape=shape, variant=vname,
                           error=f"{type(exc).__name__}: {str(exc)[:300]}")
            finally:
                for k, val in saved.items():
                    setattr(mod, k, val)
            emit(fh, row)
        del inputs, want
        torch.cuda.empty_cache()


def table(path):
    rows = [json.loads(line) for line in open(path)]
    best = {}
    for r in rows:
        key = (r["problem"], r["dtype"], json.dumps(r["shape"]))
        if "error" in r:
            continue
        b = best.setdefault(key, {"default": None, "best": None})
        if r["variant"] == "default":
            b["default"] = r
        if b["best"] is None or r["vs_base"] > b["best"]["vs_base"]:
            b["best"] = r
    geo = {}
    for (prob, dt, shape), b in best.items():
        d, w = b["default"], b["best"]
        dv = d["vs_base"] if d else float("nan")
        print(f"{prob:8} {dt:9} {shape:70} default {dv:.3f}  best {w['vs_base']:.3f} {w['variant']} "
              f"err {w['err']:.1e}")
        geo.setdefault((prob, dt), []).append((dv, w["vs_base"]))
    for k, v in geo.items():
        g = [math.exp(sum(math.log(x[j]) for x in v) / len(v)) for j in (0, 1)]
        print(k, f"geomean default {g[0]:.3f}, best-per-shape {g[1]:.3f} over {len(v)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--only", default=",".join(TARGETS), help="comma-separated: " + ",".join(TARGETS))
    p.add_argument("--dtype", default="bfloat16", help="a torch dtype name, or tf32 (float32 data, TF32 allowed)")
    p.add_argument("--shapes", help="comma-separated indices into the benchmark list (default all)")
    args = p.parse_args(argv)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, file=sys.stderr)
    t0 = time.time()
    shapes = args.shapes and {int(i) for i in args.shapes.split(",")}
    tf32 = args.dtype == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")   # what the judge sets for each dtype
    with open(args.out, "a") as fh:
        for name in args.only.split(","):
            sweep(fh, name, torch.float32 if tf32 else getattr(torch, args.dtype), shapes, tf32)
            print(f"{name} {args.dtype} done at {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    table(args.out)


if __name__ == "__main__":
    main()
