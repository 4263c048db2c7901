"""Config sweep for the persistent Triton solutions (gemm, grouped_gemm_moe, int8_gemm, w8a8_gemm,
attention_fwd, fp8_gemm_blockwise) on one GPU: every variant timed with
triton.testing.do_bench on the same inputs as the baselines, correctness checked against torch, one JSON line per
(shape, variant) written as it comes, a table at the end.

This is the measurement behind the configs chosen in solutions/*/triton_persistent.py (the issue asks for the
floor, the prediction and the measurement beside each kernel). It is not Gauntlet's figure: `gauntlet run` times
the chosen config against the baselines in clean worker processes. Usage (on a GPU machine):
    python scripts/sweep_configs.py --out results/sweep.jsonl [--only gemm|grouped|int8|attention|fp8] [--quick]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import pathlib
import re
import sys
import time

import torch
import triton
from triton.testing import do_bench

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load(path: str):
    spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem + "_" + str(abs(hash(path))), ROOT / path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Force:
    """A kernel whose launches get some meta-parameters overridden (GROUP_M, TMA_STORE, ...)."""

    def __init__(self, kernel, **kw):
        self.kernel, self.kw = kernel, kw

    def __getitem__(self, grid):
        launch = self.kernel[grid]
        return lambda *a, **m: launch(*a, **{**m, **self.kw})


def variant(mod, kernel_names, config=None, config_name="_config", **kw):
    """A context that patches mod's config function `config_name` (to a fixed tuple, or a function of the default)
    and its kernels' meta-parameters."""
    class Ctx:
        def __enter__(self):
            self.saved = {n: getattr(mod, n) for n in [config_name, *kernel_names]}
            if config is not None:
                base = self.saved[config_name]
                setattr(mod, config_name,
                        (lambda *a: config(base(*a))) if callable(config) else (lambda *a: config))
            if kw:
                for n in kernel_names:
                    setattr(mod, n, Force(self.saved[n], **kw))
            return self

        def __exit__(self, *exc):
            for n, v in self.saved.items():
                setattr(mod, n, v)
    return Ctx()


def rel_err(out, ref):
    return float((out.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-30))


def bench(fn):
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, warmup=25, rep=150, return_mode="median")


def emit(fh, row):
    print(json.dumps(row), flush=True)
    fh.write(json.dumps(row) + "\n")
    fh.flush()


def sweep_gemm(fh, quick):
    tiled = load("solutions/gemm/triton_tiled.py")
    pers = load("solutions/gemm/triton_persistent.py")
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 7168, 2048), (4096, 14336, 4096),
              (128, 14336, 4096), (128, 4096, 14336)]
    kn = ["_gemm_tma_kernel"]
    big = lambda c, new: new if c[0] == 128 and c[1] == 256 else c      # noqa: E731 (only the large-tile class)
    variants = {
        "default": {},
        "g16": dict(GROUP_M=16),
        "g32": dict(GROUP_M=32),
        "g16_st3": dict(GROUP_M=16, config=lambda c: (*c[:4], 3, c[5])),
        "g16_nosplit": dict(GROUP_M=16, config=lambda c: big(c, (128, 256, 64, 8, 3, False))),
        "g16_256x128": dict(GROUP_M=16, config=lambda c: big(c, (256, 128, 64, 8, 4, True))),
        "g16_128x256x128": dict(GROUP_M=16, config=lambda c: big(c, (128, 256, 128, 8, 2, True))),
    }
    if quick:
        variants = {k: variants[k] for k in ("default", "g16")}
    for dtype in (torch.bfloat16, torch.float16):
        for M, N, K in shapes:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            ref = a @ b
            t_cublas = bench(lambda: a @ b)
            t_tiled = bench(lambda: tiled.solve(a, b))
            flops = 2 * M * N * K
            for name, v in variants.items():
                if dtype == torch.float16 and name != "default":
                    continue
                v = dict(v)
                cfg = v.pop("config", None)
                try:
                    with variant(pers, kn, cfg, **v):
                        err = rel_err(pers.solve(a, b), ref)
                        t = bench(lambda: pers.solve(a, b))
                        used = pers._config(M, N, K, True, pers._card(a.device)[0])
                    row = dict(problem="gemm", dtype=str(dtype)[6:], shape=[M, N, K], variant=name, config=used,
                               err=err, ms=t, cublas_ms=t_cublas, tiled_ms=t_tiled, vs_cublas=t_cublas / t,
                               tiled_vs_cublas=t_cublas / t_tiled, tflops=flops / t / 1e9)
                except Exception as exc:          # a config that does not compile is a data point, not a stop
                    row = dict(problem="gemm", dtype=str(dtype)[6:], shape=[M, N, K], variant=name,
                               error=f"{type(exc).__name__}: {str(exc)[:300]}")
                emit(fh, row)
            del a, b, ref
            torch.cuda.empty_cache()


def sweep_grouped(fh, quick):
    import yaml
    ref_mod = load("problems/grouped_gemm_moe/reference.py")
    loop = load("solutions/grouped_gemm_moe/cublas_loop.py")
    gmm = load("solutions/grouped_gemm_moe/grouped_mm.py")
    tiled = load("solutions/grouped_gemm_moe/triton_grouped.py")
    pers = load("solutions/grouped_gemm_moe/triton_persistent.py")
    shapes = yaml.safe_load((ROOT / "problems/grouped_gemm_moe/problem.yaml").read_text())["benchmark"]
    kn = ["_grouped_tma_kernel"]
    variants = {
        "default": {},
        "st-1": dict(config=lambda c: (*c[:4], max(2, c[4] - 1))),
        "bn128": dict(config=lambda c: (c[0], 128, *c[2:]) if c[1] == 256 else c),
        "bm64": dict(config=lambda c: (64, *c[1:]) if c[0] < 64 else c),
        "bk64": dict(config=lambda c: (c[0], c[1], 64, c[3], min(6, c[4] + 1)) if c[2] == 128 else c),
        "g16": dict(GROUP_M=16),
    }
    if quick:
        variants = {k: variants[k] for k in ("default", "g16")}
    for dtype in (torch.bfloat16, torch.float16):
        for sh in shapes:
            shape = {k: sh[k] for k in ("M", "N", "K", "E", "routing")}
            x, w, offs = ref_mod.make_inputs(shape, dtype, 1234, "cuda")
            ref = loop.solve(x, w, offs)
            t_loop = bench(lambda: loop.solve(x, w, offs))
            t_gmm = bench(lambda: gmm.solve(x, w, offs))
            t_tiled = bench(lambda: tiled.solve(x, w, offs))
            M, N, K, E = shape["M"], shape["N"], shape["K"], shape["E"]
            for name, v in variants.items():
                if dtype == torch.float16 and name != "default":
                    continue
                v = dict(v)
                cfg = v.pop("config", None)
                try:
                    with variant(pers, kn, cfg, **v):
                        err = rel_err(pers.solve(x, w, offs), ref)
                        t = bench(lambda: pers.solve(x, w, offs))
                        used = pers._config(M, N, K, E, True, pers._sm_count(x.device))
                    row = dict(problem="grouped", dtype=str(dtype)[6:], shape=shape, variant=name, config=used,
                               err=err, ms=t, loop_ms=t_loop, gmm_ms=t_gmm, tiled_ms=t_tiled,
                               vs_gmm=t_gmm / t, vs_loop=t_loop / t, tiled_vs_gmm=t_gmm / t_tiled,
                               tflops=2 * M * N * K / t / 1e9,
                               gbps=((M * K + E * N * K) * 2 + M * N * 2) / t / 1e6)
                except Exception as exc:
                    row = dict(problem="grouped", dtype=str(dtype)[6:], shape=shape, variant=name,
                               error=f"{type(exc).__name__}: {str(exc)[:300]}")
                emit(fh, row)
            del x, w, offs, ref
            torch.cuda.empty_cache()


def sweep_int8(fh, quick):
    """int8_gemm and w8a8_gemm: the persistent kernels' variants against _int_mm (TN) and the scaled baseline."""
    import yaml
    refs = {p: load(f"problems/{p}/reference.py") for p in ("int8_gemm", "w8a8_gemm")}
    int_mm = load("solutions/int8_gemm/int_mm.py")
    scaled = load("solutions/w8a8_gemm/int_mm_scaled.py")
    tiled = {"int8_gemm": load("solutions/int8_gemm/triton_int8.py"),
             "w8a8_gemm": load("solutions/w8a8_gemm/triton_w8a8.py")}
    pers = {"int8_gemm": load("solutions/int8_gemm/triton_persistent.py"),
            "w8a8_gemm": load("solutions/w8a8_gemm/triton_persistent.py")}
    kn = {"int8_gemm": ["_int8_tma_kernel"], "w8a8_gemm": ["_w8a8_tma_kernel"]}
    shapes = yaml.safe_load((ROOT / "problems/int8_gemm/problem.yaml").read_text())["benchmark"]

    big = lambda c, new: new if c[0] == 128 and c[1] == 256 else c      # noqa: E731 (only the large-tile class)
    variants = {
        "default": {},
        "g16": dict(GROUP_M=16),
        "bk64": dict(config=lambda c: big(c, (128, 256, 64, 8, 4, c[5]))),
        "256x128": dict(config=lambda c: big(c, (256, 128, 128, 8, 3, c[5]))),
        "128x128": dict(config=lambda c: big(c, (128, 128, 128, 8, 4, 1 if c[5] == 1 else c[5] // 2))),
        "bn_half": dict(config=lambda c: (c[0], max(32, c[1] // 2), *c[2:5], max(1, c[5] // 2))),
    }
    if quick:
        variants = {k: variants[k] for k in ("default", "g16")}
    for problem in ("int8_gemm", "w8a8_gemm"):
        for sh in shapes:
            M, N, K = sh["M"], sh["N"], sh["K"]
            inputs = refs[problem].make_inputs(dict(M=M, N=N, K=K), torch.int8, 1234, "cuda")
            if problem == "int8_gemm":
                a, w = inputs
                t_mm = bench(lambda: int_mm.solve(a, w))
                ref = int_mm.solve(a, w)
                t_base = t_mm
            else:
                x, sx, w, sw = inputs
                t_mm = bench(lambda: int_mm.solve(x, w))
                t_base = bench(lambda: scaled.solve(*inputs))
                ref = scaled.solve(*inputs)
            t_tiled = bench(lambda: tiled[problem].solve(*inputs))
            for name, v in variants.items():
                if problem == "w8a8_gemm" and name not in ("default", "g16", "128x128"):
                    continue
                if M <= 128 and name != "default":    # short M takes the split-K path: _config plays no part
                    continue
                v = dict(v)
                cfg = v.pop("config", None)
                mod = pers[problem]
                try:
                    with variant(mod, kn[problem], cfg, **v):
                        out = mod.solve(*inputs)
                        err = (float((out != ref).sum()) if problem == "int8_gemm" else rel_err(out, ref))
                        t = bench(lambda: mod.solve(*inputs))
                        n_sm = mod._sm_count(w.device)
                        used = mod._splitk_config(M, N, K, n_sm) or mod._config(M, N, K, True, n_sm)
                    row = dict(problem=problem, dtype="int8", shape=[M, N, K], variant=name, config=used, err=err,
                               ms=t, int_mm_ms=t_mm, base_ms=t_base, tiled_ms=t_tiled, vs_base=t_base / t,
                               vs_int_mm=t_mm / t, tiled_vs_base=t_base / t_tiled, tflops=2 * M * N * K / t / 1e9)
                except Exception as exc:
                    row = dict(problem=problem, dtype="int8", shape=[M, N, K], variant=name,
                               error=f"{type(exc).__name__}: {str(exc)[:300]}")
                emit(fh, row)
            del inputs, ref
            torch.cuda.empty_cache()


def sweep_attention(fh, quick, only=None, pattern=None):
    """attention_fwd: triton_flash's tile configs and KV-split counts against SDPA's best backend (the baseline)."""
    import yaml
    ref_mod = load("problems/attention_fwd/reference.py")
    sdpa = load("solutions/attention_fwd/torch_sdpa.py")
    flash = load("solutions/attention_fwd/triton_flash.py")
    shapes = yaml.safe_load((ROOT / "problems/attention_fwd/problem.yaml").read_text())["benchmark"]
    dims = ("B", "Hkv", "G", "Sq", "Sk", "D", "causal")
    variants = {"default": {}}
    for cfg in [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 4), (64, 64, 4, 3),
                (64, 128, 4, 3), (128, 32, 4, 3), (128, 64, 8, 2), (128, 64, 4, 4)]:
        variants["cfg%dx%dw%ds%d" % cfg] = dict(config=lambda M, D, c=cfg: c if M > 64 else None)
    for bn, st in [(128, 3), (64, 4), (256, 2), (32, 4)]:
        variants["dec_bn%d_s%d" % (bn, st)] = dict(config=lambda M, D, c=(bn, st): (max(16, triton.next_power_of_2(M)), c[0], 4, c[1]) if M <= 64 else None)
    for cfg in [(128, 64, 8, 4), (128, 128, 8, 3), (64, 64, 4, 4), (64, 64, 4, 2)]:
        variants["cfg%dx%dw%ds%d" % cfg] = dict(config=lambda M, D, c=cfg: c if M > 64 else None)
    for mult in (2, 4):                  # KV splits per SM (the solution's rule: 1)
        variants[f"split_x{mult}"] = dict(splits=lambda M, bm, tiles, nb, n_sm, m=mult:
                                          (min(triton.cdiv(m * n_sm, tiles), nb // 2) if nb >= 4 and (tiles < n_sm if M <= bm else 2 * tiles <= n_sm) else 1))
    if quick:
        variants = {k: variants[k] for k in list(variants)[:3]}
    if pattern:
        variants = {k: v for k, v in variants.items() if re.search(pattern, k)}
    for dtype in (torch.bfloat16,):
        for i, sh in enumerate(shapes):
            if only is not None and i not in only:
                continue
            shape = {k: sh[k] for k in dims}
            q, k, v, causal = ref_mod.make_inputs(shape, dtype, 1234, "cuda")
            ref = sdpa.solve(q, k, v, causal)
            t_sdpa = bench(lambda: sdpa.solve(q, k, v, causal))
            flops = eval(yaml.safe_load((ROOT / "problems/attention_fwd/problem.yaml").read_text())["flops"],
                         {"math": math}, shape)
            bench(lambda: flash.solve(q, k, v, causal))   # warm-up before the first variant
            for name, v_ in variants.items():
                base_cfg, base_split = flash._config, flash._splits
                M = shape["Sq"] * shape["G"]
                try:
                    if "config" in v_:
                        c = v_["config"](M, shape["D"])
                        if c is None:
                            continue
                        flash._config = lambda M_, D_, c=c: c
                    if "splits" in v_:
                        flash._splits = v_["splits"]
                    err = rel_err(flash.solve(q, k, v, causal), ref)
                    t = bench(lambda: flash.solve(q, k, v, causal))
                    row = dict(problem="attention", dtype=str(dtype)[6:], shape=[shape[d] for d in dims],
                               variant=name, config=flash._config(M, shape["D"]), err=err, ms=t, sdpa_ms=t_sdpa,
                               vs_sdpa=t_sdpa / t, tflops=flops / t / 1e9)
                except Exception as exc:
                    row = dict(problem="attention", dtype=str(dtype)[6:], shape=[shape[d] for d in dims],
                               variant=name, error=f"{type(exc).__name__}: {str(exc)[:300]}")
                finally:
                    flash._config, flash._splits = base_cfg, base_split
                emit(fh, row)
            del q, k, v, ref
            torch.cuda.empty_cache()


def sweep_fp8(fh, quick, only=None, pattern=None):
    """fp8_gemm_blockwise: triton_blockwise's GEMM tiles (_gemm_config) and program order (GROUP_M) against the
    baseline (torch._scaled_mm, cuBLASLt's block-scaled fp8), the activation quantization included on both sides."""
    import yaml
    ref_mod = load("problems/fp8_gemm_blockwise/reference.py")
    base = load("solutions/fp8_gemm_blockwise/torch_blockwise.py")
    fp8 = load("solutions/fp8_gemm_blockwise/triton_blockwise.py")
    shapes = yaml.safe_load((ROOT / "problems/fp8_gemm_blockwise/problem.yaml").read_text())["benchmark"]
    cfgs = [(128, 128, 8, 4), (128, 128, 8, 3), (128, 256, 8, 3), (128, 256, 8, 2), (64, 256, 4, 4),
            (128, 64, 4, 4), (64, 128, 4, 4), (64, 128, 4, 6), (256, 128, 8, 3)]
    variants = {"default": {}, "g16": dict(GROUP_M=16, kernel="_fp8_block_gemm_tma_kernel"),
                "g4": dict(GROUP_M=4, kernel="_fp8_block_gemm_tma_kernel"),
                "g32": dict(GROUP_M=32, kernel="_fp8_block_gemm_tma_kernel")}
    # the persistent TMA path (_tma_config: bm, bn, warps, stages, programs an SM, split store); "tiled" turns it off
    for c in [(128, 128, 8, 4, 1, True), (128, 128, 8, 3, 1, True), (128, 128, 8, 4, 1, False),
              (64, 128, 4, 3, 2, False), (64, 128, 4, 4, 1, True), (128, 256, 8, 3, 1, True),
              (64, 256, 4, 3, 1, True), (128, 64, 4, 4, 2, False), (64, 128, 4, 3, 2, True),
              (64, 128, 4, 2, 3, False), (64, 128, 4, 4, 2, False), (64, 128, 4, 3, 1, False),
              (64, 128, 4, 5, 1, False), (64, 64, 4, 4, 3, False)]:
        variants["tma%dx%dw%ds%d_x%d_split%d" % c] = dict(config=c, cname="_tma_config",
                                                          kernel="_fp8_block_gemm_tma_kernel")
    variants["tiled"] = dict(config=False, cname="_tma_config")
    for c in cfgs:
        variants["cfg%dx%dw%ds%d" % c] = dict(config=(*c, 1), tiled=True)
    for s in (1, 2, 3, 4, 6, 8, 12):           # split-K over the default tile, and over 64x128
        variants[f"split{s}"] = dict(config=lambda c, s=s: (*c[:4], s), tiled=True)
        variants[f"64x128_split{s}"] = dict(config=(64, 128, 4, 4, s), tiled=True)
    if quick:
        variants = {k: variants[k] for k in list(variants)[:3]}
    if pattern:
        variants = {k: v for k, v in variants.items() if re.search(pattern, k)}
    for i, sh in enumerate(shapes):
        if only is not None and i not in only:
            continue
        shape = {k: sh[k] for k in ("M", "N", "K")}
        x, w, ws = ref_mod.make_inputs(shape, torch.bfloat16, 1234, "cuda")
        ref = base.solve(x, w, ws)
        t_base = bench(lambda: base.solve(x, w, ws))
        bench(lambda: fp8.solve(x, w, ws))    # warm-up: the first variant timed at a shape otherwise reads slow
        flops = 2 * shape["M"] * shape["N"] * shape["K"]
        for name, v in variants.items():
            v = dict(v)
            cfg = v.pop("config", None)
            cname = v.pop("cname", "_gemm_config")
            kernel = v.pop("kernel", "_fp8_block_gemm_kernel")
            tiled = v.pop("tiled", False)      # a tiled-kernel config: the persistent path off
            try:
                with variant(fp8, [kernel], cfg, config_name=cname, **v), \
                        variant(fp8, [], False if tiled else None, config_name="_tma_config"):
                    err = rel_err(fp8.solve(x, w, ws), ref)
                    t = bench(lambda: fp8.solve(x, w, ws))
                    used = fp8._gemm_config(shape["M"], shape["N"], triton.cdiv(shape["K"], fp8.BLOCK),
                                            fp8._sm_count(x.device))
                    used = [fp8._tma_config(shape["M"], shape["N"], triton.cdiv(shape["K"], fp8.BLOCK),
                                            fp8._sm_count(x.device)), used]
                row = dict(problem="fp8", dtype="float8_e4m3", shape=list(shape.values()), variant=name,
                           config=used, err=err, ms=t, base_ms=t_base, vs_base=t_base / t, tflops=flops / t / 1e9)
            except Exception as exc:          # a config that does not compile is a data point, not a stop
                row = dict(problem="fp8", dtype="float8_e4m3", shape=list(shape.values()), variant=name,
                           error=f"{type(exc).__name__}: {str(exc)[:300]}")
            emit(fh, row)
        del x, w, ws, ref
        torch.cuda.empty_cache()


def table(path):
    rows = [json.loads(line) for line in open(path)]
    rows = [r for r in rows if "error" not in r or r["variant"] == "default"]
    geo = {}
    for r in rows:
        if "error" in r:
            print(f"{r['problem']:8} {r['dtype']:9} {str(r['shape']):40} {r['variant']:12} ERROR {r['error'][:80]}")
            continue
        key = {"gemm": "vs_cublas", "grouped": "vs_gmm", "attention": "vs_sdpa"}.get(r["problem"], "vs_base")
        geo.setdefault((r["problem"], r["dtype"], r["variant"]), []).append(r[key])
        if r["problem"] == "gemm":
            extra = f"tiled {r['tiled_vs_cublas']:.3f}"
        elif r["problem"] in ("attention", "fp8"):
            extra = ""
        elif r["problem"] == "grouped":
            extra = f"vs_loop {r['vs_loop']:.2f} tiled {r['tiled_vs_gmm']:.3f}"
        else:
            extra = f"vs_int_mm {r['vs_int_mm']:.3f} tiled {r['tiled_vs_base']:.3f}"
        shape = r["shape"] if r["problem"] != "grouped" else [r["shape"][k] for k in ("M", "N", "K", "E")] + \
            [r["shape"]["routing"][:4]]
        print(f"{r['problem']:8} {r['dtype']:9} {str(shape):34} {r['variant']:12} {key} {r[key]:.3f}  {extra}  "
              f"{r['tflops']:.0f} TF/s err {r['err']:.1e} cfg {r['config']}")
    print("geomeans:")
    for k, v in geo.items():
        print(k, f"{math.exp(sum(map(math.log, v)) / len(v)):.3f} over {len(v)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--only", choices=["gemm", "grouped", "int8", "attention", "fp8"])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--fp8-shapes", help="fp8 only: comma-separated indices into its benchmark list (default all)")
    p.add_argument("--attn-shapes", help="attention only: comma-separated indices into its benchmark list")
    p.add_argument("--variants", help="attention and fp8: a regular expression the variants' names must match")
    args = p.parse_args(argv)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, file=sys.stderr)
    t0 = time.time()
    with open(args.out, "a") as fh:
        if args.only in (None, "gemm"):
            sweep_gemm(fh, args.quick)
        if args.only in (None, "grouped"):
            sweep_grouped(fh, args.quick)
        if args.only in (None, "int8"):
            sweep_int8(fh, args.quick)
        if args.only in (None, "attention"):
            sweep_attention(fh, args.quick, args.attn_shapes and {int(i) for i in args.attn_shapes.split(',')},
                            args.variants)
        if args.only in (None, "fp8"):
            sweep_fp8(fh, args.quick, args.fp8_shapes and {int(i) for i in args.fp8_shapes.split(',')}, args.variants)
    print(f"sweep took {time.time() - t0:.0f} s", file=sys.stderr)
    table(args.out)


if __name__ == "__main__":
    main()
