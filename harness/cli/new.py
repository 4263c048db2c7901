"""`gauntlet new NAME [--from PROBLEM]`: a problem folder that judges as made, in the user's problems folder.

Without --from: a small elementwise problem (SiLU) whose problem.yaml explains each key, its reference.py, and a
baseline solution (the reference's math in PyTorch) in the solutions folder: the shape of every problem, to edit.
With --from: a copy of that problem (Gauntlet's own or the user's), its id renamed and each baseline that names a
solution of its own re-pointed at PROBLEM/NAME, so it keeps judging against the very same baseline file once its
reference is edited (gauntlet.discover resolves PROBLEM/NAME through the user's and the shipped solutions).

Where: the first problems folder of the search path (--problems, GAUNTLET_PROBLEMS, [tool.gauntlet]); where none is
set, ./problems, and a `[tool.gauntlet] problems = "problems"` is added to ./pyproject.toml so that every later
command finds it (in a checkout of Gauntlet, ./problems is the shipped folder itself and nothing is added).
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from .. import discover, searchpath
from . import options
from ..discover import UsageError


def add(sub) -> None:
    p = sub.add_parser("new", help="make a problem folder (problem.yaml, reference.py and a baseline) that judges as "
                                   "made, in your problems folder")
    p.add_argument("name", help="the new problem's id (its folder's name): a Python identifier")
    p.add_argument("--from", dest="source", metavar="PROBLEM",
                   help="copy this problem (shipped or yours) instead of the elementwise template")
    options.search_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if not args.name.isidentifier():
        raise UsageError(f"problem name {args.name!r} must be a Python identifier (letters, digits, _), e.g. my_gemm")
    sp = discover.search_path()
    found = discover.locate_problems(sp).get(args.name)
    if found is not None and not found.shipped:     # a shipped id may be shadowed (gauntlet.discover says how)
        raise UsageError(f"problem {args.name!r} exists already ({found.folder}); choose another name")
    source = discover.get_problem(args.source, sp) if args.source else None
    problems, solutions, config = _folders(sp)
    folder = problems / args.name
    if folder.exists():
        raise UsageError(f"{folder} exists already; choose another name or remove it")
    made = _copy(source, folder, args.name) if source else _template(folder, solutions / args.name, args.name)
    (solutions / args.name).mkdir(parents=True, exist_ok=True)      # where its solutions go
    if config:
        print(f"gauntlet new: added [tool.gauntlet] problems = \"problems\" to {config}, so that every command "
              "finds your problems", file=sys.stderr)
    sp = searchpath.resolve(problems=args.problems, solutions=args.solutions)
    problem = discover.get_problem(args.name, sp)          # judges as made: it loads, its baselines resolve
    baselines = ", ".join(f"{k}: {v} ({problem.baseline_paths[k]})" for k, v in problem.baselines.items())
    print(f"made {', '.join(str(p) for p in made)}\nbaselines: {baselines}\n"
          f"next: write {solutions / args.name}/NAME.py (BACKEND and solve) and run `gauntlet eval {args.name} NAME`")
    return 0


def _folders(sp) -> tuple[Path, Path, Path | None]:
    """(problems folder, solutions folder, the pyproject.toml given a [tool.gauntlet] table, if one was)."""
    if sp.problems:
        problems = sp.problems[0]
        return problems, sp.solutions[0] if sp.solutions else problems.parent / "solutions", None
    here = Path.cwd().resolve()
    shipped_problems, shipped_solutions = searchpath.shipped_folders()
    if (here / "problems").resolve() == shipped_problems.resolve():
        return shipped_problems, shipped_solutions, None   # a checkout: its problems folder is the shipped one
    (here / "problems").mkdir(exist_ok=True)
    config = here / "pyproject.toml"
    text = config.read_text(encoding="utf-8") if config.is_file() else ""
    config.write_text(text + ("\n" if text and not text.endswith("\n") else "")
                      + ("\n" if text else "") + '[tool.gauntlet]\nproblems = "problems"\n', encoding="utf-8")
    return here / "problems", here / "solutions", config


def _copy(source, folder: Path, name: str) -> list[Path]:
    """The source problem's files, its id renamed and its own baselines re-pointed at SOURCE/NAME."""
    shutil.copytree(source.root, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    yaml = folder / "problem.yaml"
    text = re.sub(rf"^id:\s*{re.escape(source.id)}\s*$", f"id: {name}", yaml.read_text(), count=1, flags=re.M)
    for label, value in source.baselines.items():
        if isinstance(value, str) and "/" not in value:
            text = re.sub(rf"^(\s+{re.escape(str(label))}:\s*){re.escape(value)}\b", rf"\g<1>{source.id}/{value}",
                          text, count=1, flags=re.M)
    yaml.write_text(text)
    return [folder / "problem.yaml", folder / "reference.py"]


def _template(folder: Path, solutions: Path, name: str) -> list[Path]:
    folder.mkdir(parents=True)
    solutions.mkdir(parents=True, exist_ok=True)
    files = {folder / "problem.yaml": PROBLEM_YAML.format(name=name),
             folder / "reference.py": REFERENCE_PY.format(name=name),
             solutions / "torch_eager.py": BASELINE_PY.format(name=name)}
    for path, text in files.items():
        if path.exists():
            raise UsageError(f"{path} exists already; remove it or choose another name")
        path.write_text(text)
    return list(files)


PROBLEM_YAML = '''\
# {name}: out = x * sigmoid(x) (SiLU), elementwise. Data only: the behaviour lives in reference.py beside this file.
# Every key is checked when the problem loads: a misspelled key is an error naming this file.
id: {name}                  # must be the folder's name
title: SiLU, out = x * sigmoid(x)
dims: [N]                   # the names of the shape's sizes; make_inputs gets {{"N": ...}}

# One entry per dtype solutions are judged in: `torch` is the inputs' storage dtype, the rest is the tolerance,
# measured against an fp64 oracle (the reference run in float64):
#   k_norm : norm-wise, the output may be at most k_norm times as wrong as torch's own answer in this dtype
#   floor  : the norm-wise budget's floor, in units of the dtype's roundoff times |output|, for where torch is exact
#   k_elem : element-wise, roundings at the dtype's own precision each element may carry before the output's
#   k_acc  : element-wise, fp32 accumulation error allowed, in units of 2**-24 (0: nothing is summed here)
dtypes:
  float32:  {{torch: float32,  k_norm: 4, floor: 2, k_elem: 4, k_acc: 0}}
  bfloat16: {{torch: bfloat16, k_norm: 4, floor: 2, k_elem: 2, k_acc: 0}}

# The sizes Hypothesis draws shapes from, per device: [lo, hi] per dim (CI judges on the CPU: keep it small there).
fuzz:
  cpu:
    N: [1, 5000]
  cuda:
    N: [1, 20000000]
  calls_per_case: 3         # fresh inputs per call: an answer cached from an earlier call is caught

# The shapes timed on a GPU, each with where it comes from.
benchmark:
  - {{N: 16777216, source: "16M elements: a large activation"}}

# label: the solution timed beside every candidate (speedups are against it): a file NAME.py in this problem's
# solutions folder, or PROBLEM/NAME for another problem's (gemm/torch_matmul is cuBLAS).
baselines:
  eager: torch_eager

# Work and traffic, as Python expressions over the dims and bytes_in/bytes_out (bytes per element): they set the
# roofline (no time below bytes / bandwidth or FLOPs / peak) and the TFLOP/s and GB/s figures.
flops: "4 * N"
bytes: "N * bytes_in + N * bytes_out"

# Optional keys: output_layout (contiguous, the default, or any), and kernelbench ({{inputs: [x]}}: how a
# KernelBench file's ModelNew.forward is called on this problem).
'''

REFERENCE_PY = '''\
"""{name}, the specification: the math in plain PyTorch. The judge runs `reference` in float64 as the oracle and in
the inputs' dtype to learn how wrong torch itself is there (problem.yaml's k_norm is relative to that)."""
import torch


def make_inputs(shape, dtype, seed, device):
    """Seeded inputs, made on the device, as a tuple in the order solve(*inputs) takes them. Make them look like the
    real ones (ranges, signs, outliers): a kernel is only judged on what this draws."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape["N"], generator=g, device=device, dtype=torch.float32) * 4
    return (x.to(dtype).contiguous(),)


def reference(x):
    return x * torch.sigmoid(x)
'''

BASELINE_PY = '''\
"""The baseline of problem {name} (problem.yaml's `baselines: eager`): the reference's math in eager PyTorch. A
candidate beside it is one more file here: BACKEND, and solve(*inputs) returning a new tensor."""
import torch

BACKEND = "torch"


def solve(x):
    return x * torch.sigmoid(x)
'''
