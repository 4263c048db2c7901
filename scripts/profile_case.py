"""One solution at one benchmark shape, run between cudaProfilerStart and cudaProfilerStop so that Nsight Compute
profiles only its steady-state launches (the warm-up's compiles and autotuning stay outside the window). This is how
the floors in the kernels' docstrings are measured (DRAM bytes, SM and DRAM throughput, occupancy, registers), e.g.:

    ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats \\
        --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv --page details \\
        python scripts/profile_case.py attention_fwd triton_flash --shape 3 --dtype bfloat16 --calls 1

Run it for the baseline too (same shape, same inputs) to set the two side by side. It is not Gauntlet's figure.
"""
from __future__ import annotations

import argparse
import sys

import torch
import yaml

from sweep_configs import ROOT, load      # scripts/ is this script's first path entry


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("problem")
    p.add_argument("solution")
    p.add_argument("--shape", type=int, default=0, help="index into the problem's benchmark list")
    p.add_argument("--dtype", required=True, help="a key of the problem's dtypes")
    p.add_argument("--calls", type=int, default=2, help="calls inside the profiled window")
    args = p.parse_args(argv)
    spec = yaml.safe_load((ROOT / "problems" / args.problem / "problem.yaml").read_text())
    if args.dtype not in spec["dtypes"]:
        sys.exit(f"--dtype {args.dtype!r} is not one of {args.problem}'s dtypes {sorted(spec['dtypes'])}")
    shape = {d: spec["benchmark"][args.shape][d] for d in spec["dims"]}
    dtype = getattr(torch, spec["dtypes"][args.dtype]["torch"])
    # What the judge sets for each dtype: "high" lets TF32 in (the tf32 entries), "highest" is true fp32.
    torch.set_float32_matmul_precision("high" if spec["dtypes"][args.dtype].get("tf32") else "highest")
    ref = load(f"problems/{args.problem}/reference.py")
    sol = load(f"solutions/{args.problem}/{args.solution}.py")
    inputs = ref.make_inputs(shape, dtype, 1234, "cuda")
    for _ in range(3):                                   # compile, autotune, warm the caches
        sol.solve(*inputs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(args.calls):
        sol.solve(*inputs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(args.problem, args.solution, shape, args.dtype, torch.cuda.get_device_name(), file=sys.stderr)


if __name__ == "__main__":
    main()
