"""The options commands share (their arguments, and the judgement options and checks made from them), and
helpers several commands call."""
from __future__ import annotations

import argparse
import os
import sys

from .. import backends, discover
from ..discover import UsageError


def formats_option(p: argparse.ArgumentParser) -> None:
    """--format and --backend: how a file of the field's other formats is read (gauntlet.formats; docs/guide.md,
    "The other formats")."""
    from .. import formats
    p.add_argument("--format", choices=("auto",) + formats.FORMATS, default="auto",
                   help="the candidate file's format: native (BACKEND + solve), kernelbench (class ModelNew), "
                        "gpumode (custom_kernel(data)); default auto: found from the names the file defines")
    p.add_argument("--backend", choices=discover.BACKENDS,
                   help="the backend of a KernelBench or GPU MODE file (default: detected from what it uses, "
                        "else a BACKEND line in it); a native file declares its own")


def executor_options(p: argparse.ArgumentParser) -> None:
    """Where `run` and `eval-many` judge (gauntlet.executors); the results are the same wherever."""
    p.add_argument("--gpus", metavar="N|all",
                   help="judge on N GPUs of this host at once (all: every visible one): one judge process per GPU, "
                        "one candidate per GPU at a time; on a CPU, N logical slots (all: GAUNTLET_LOGICAL_GPUS)")
    p.add_argument("--overlap", type=int, default=None, metavar="K",
                   help="K judges per GPU (default 1; on cuda, run: 2 cores and 18 GiB of the card a judge, at "
                        "most 4; eval-many --screen: 2): their correctness phases run side by side, each timing with "
                        "the card alone; each judge gets 1/K of the GPU's memory")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: this host (default); ray: one Ray task per candidate, on the cluster at --address "
                        "or a local one (pip install 'gauntlet[ray]')")
    p.add_argument("--address", help="with --executor ray: the cluster's address (as `ray start --head` prints "
                                     "it; default RAY_ADDRESS, else a new local cluster)")


def executor(args, device: str):
    from .. import executors
    return executors.make(args.executor, device, args.gpus, args.address, args.overlap or 1)


def search_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", action="append", metavar="PATH",
                   help="a folder of problem folders, searched before the shipped ones (repeatable; replaces "
                        "GAUNTLET_PROBLEMS and [tool.gauntlet] problems in pyproject.toml)")
    p.add_argument("--solutions", action="append", metavar="PATH",
                   help="a folder of <problem>/<name>.py solutions (repeatable; default: the solutions/ folder "
                        "beside each problems folder)")


def search_path(args):
    """The search path for commands that take --problems; None (resolved on use) for the others."""
    if not hasattr(args, "problems"):
        return None
    from .. import searchpath
    return searchpath.resolve(problems=args.problems, solutions=args.solutions)


def common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", action="append", help="limit to these dtypes (repeatable)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda if there is a GPU, else cpu")
    p.add_argument("--examples", type=positive, default=None, help="Hypothesis examples per dtype")
    p.add_argument("--seed", type=seed, help="fix the fuzzing seed, 0 <= seed < 2**31 (default: fresh, recorded)")
    p.add_argument("--no-timing", action="store_true", help="judge correctness only")
    p.add_argument("--timeout", type=seconds, default=180.0, help="seconds allowed per call (default 180)")
    p.add_argument("--max-shapes", type=positive, help="time only the first N benchmark shapes of each problem")
    p.add_argument("--sandbox", choices=("require", "auto", "off"), default="auto",
                   help="OS confinement of the workers: require (refuse to judge without it), auto (what the kernel "
                        "offers, recorded; default), off (resource bounds only)")
    p.add_argument("--time-limit", type=seconds, default=3600.0, dest="time_limit",
                   help="total seconds one judgement's candidate workers may take (default 3600)")


def number(text: str, kind, what: str):
    """argparse names a failed `type=` by the function's name ("invalid positive value"); say what was wanted."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


def positive(text: str) -> int:
    value = number(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def seed(text: str) -> int:
    value = number(text, int, "an integer in [0, 2**31)")
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**31), got {value}")
    return value


def seconds(text: str) -> float:
    value = number(text, float, "a number of seconds in (0, 86400]")
    if not 0 < value <= 24 * 3600:       # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, 86400], got {text}")
    return value


def version() -> str:
    from importlib import metadata
    try:
        return metadata.version("gauntlet")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: a plain checkout)"


def judge_options(args, device: str):
    from ..judge.evaluate import Options
    # `run` on a CPU is a smoke check (nothing to time, and the interpreter is slow): fewer examples and only the
    # first edge cases (the odd ends), unless examples are asked for. With all ten edges the 29 shipped solutions
    # took about 13 minutes on 2 cores; `eval` and the pytest plugin still judge every edge.
    smoke = device == "cpu" and args.command == "run" and not args.examples
    default = 30 if device == "cuda" else (CPU_RUN_EXAMPLES if args.command == "run" else 20)
    examples = args.examples or default
    return Options(device=device, dtypes=tuple(args.dtype) if args.dtype else None, examples=examples,
                   seed=args.seed, case=getattr(args, "case", None), timing=not args.no_timing,
                   case_timeout_s=args.timeout, max_shapes=args.max_shapes,
                   max_edges=CPU_RUN_EDGES if smoke else None, sandbox=args.sandbox, time_limit_s=args.time_limit)


def check_format(problem, solution, backend) -> None:
    """The user's pairing, refused before anything runs: a KernelBench file on a problem without a KernelBench
    mapping, or --backend for a native file (which declares its own). What is wrong with the file itself is the
    candidate's, a verdict (import_error)."""
    from .. import formats
    unmatched = formats.problem_support(problem, solution.format)
    if unmatched and not solution.error:
        raise UsageError(f"{solution.path}: {unmatched}")
    if backend and solution.format == "native" and solution.backend != backend:
        raise UsageError(f"--backend {backend} is for KernelBench and GPU MODE files; {solution.path} is a native "
                         f"solution, which declares BACKEND = {solution.backend!r}")


def check_dtypes(dtypes, problems) -> None:
    """An unknown --dtype is the user's error (with the known ones), found before anything is judged."""
    for name in dtypes or ():
        if not any(name in p.dtypes for p in problems):
            known = sorted({d for p in problems for d in p.dtypes})
            raise UsageError(f"unknown dtype {name!r}; known: {', '.join(known)}")


CPU_RUN_EXAMPLES = 2


CPU_RUN_EDGES = 2
# `run` on cuda, unless told otherwise: the first RUN_SHAPES benchmark shapes of each dtype timed (a problem lists its
# headline shape first) and several judges per GPU (run_overlap). Why: at every shape and one judge, the shipped suite
# takes most of an hour of one card's judging, two thirds of it timing, and its correctness alone (a cold cache's
# compiling, one judge) takes longer than the ten minutes a push's CI can give it (docs/benchmarks.md, "The main job
# on one GPU"). Correctness is judged in full (every dtype, every example); only the breadth of timing is a choice,
# and `--all-shapes` restores it.
RUN_SHAPES = 1
# Judges per GPU for `run`: as many as the host's cores and the card's memory carry, at most RUN_OVERLAP_MAX.
# - RUN_OVERLAP_MAX: 4, the most that has judged every shipped solution right on an 80 GB and a 141 GB card. More
#   judges gain little wall time (the card, not the host, is the limit) and shrink each judge's fuzzed cases
#   (docs/benchmarks.md, "Tried and not kept").
# - GIB_PER_JUDGE: each judge sizes its fuzzed cases to its share of the card (gauntlet.judge.values.memory), so the
#   more judges, the smaller bmm's and grouped_gemm_moe's largest drawn cases. 18 keeps an 80 GB card at 4 and gives
#   a 40 GB card 2 and a 24 GB one 1, so a smaller card does not shrink the cases further than an 80 GB one does.
# - CORES_PER_JUDGE: a judge in its correctness phase and its candidate's worker keep about 1.5 cores busy at their
#   peaks (docs/benchmarks.md, "The main job on one GPU"); 2 leaves room for a cold cache's compiling.
# Timed shapes take turns with the card alone whatever the count, so it moves wall time, never a figure.
RUN_OVERLAP_MAX, CORES_PER_JUDGE, GIB_PER_JUDGE = 4, 2, 18


def run_overlap(cores: int, gpus: int, gib_per_gpu: float | None) -> int:
    """Judges per GPU for `run` on a host of `cores` CPUs (those this process may use) judging on `gpus` GPUs of
    `gib_per_gpu` GiB each (None: unknown, no bound from memory): at least 1, at most RUN_OVERLAP_MAX."""
    by_cores = cores // (CORES_PER_JUDGE * max(1, gpus))
    by_memory = int(gib_per_gpu // GIB_PER_JUDGE) if gib_per_gpu else RUN_OVERLAP_MAX
    return max(1, min(RUN_OVERLAP_MAX, by_cores, by_memory))


def _host(args, device: str) -> tuple[int, int, float | None]:
    """(cores, GPUs judged on, GiB of the first) for run_overlap: the cores this process may run on, the GPUs
    `--gpus` names (gauntlet.executors.slots), the card's memory from the driver (no CUDA context started)."""
    from .. import cards
    from ..executors import slots
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    gpus = len(slots.slot_devices(args.gpus or "1", device))
    card = cards.CardMemory.current()
    total = card.total() if card is not None else 0
    return cores, gpus, (total / 2**30 if total else None)


def run_preset(args, device: str, host=None) -> list[str]:
    """`gauntlet run`'s defaults on cuda (RUN_SHAPES, run_overlap), set on `args` where the user gave no value of
    their own; returns what was set, in words, for the run's first line (so nobody mistakes one timed shape for the
    whole range). UsageError for --all-shapes with --max-shapes (two answers to one question). `host`: _host's
    (cores, gpus, GiB), read from the machine when not given."""
    if args.all_shapes and args.max_shapes is not None:
        raise UsageError("--all-shapes and --max-shapes both say how many shapes to time: give one")
    chose = []
    if device != "cuda":
        return chose
    if args.max_shapes is None and not args.all_shapes and not args.no_timing:
        args.max_shapes = RUN_SHAPES
        chose.append(f"the first {RUN_SHAPES} benchmark shape(s) of each dtype timed (--all-shapes for every one)")
    if args.overlap is None and args.executor != "ray":
        cores, gpus, gib = host if host is not None else _host(args, device)
        args.overlap = run_overlap(cores, gpus, gib)
        chose.append(f"{args.overlap} judges per GPU (--overlap K; from {cores} cores for {gpus} GPU(s)"
                     + (f" of {gib:.0f} GiB" if gib else "") + f": {CORES_PER_JUDGE} cores and {GIB_PER_JUDGE} GiB "
                     f"a judge, at most {RUN_OVERLAP_MAX})")
    return chose


def device(args) -> str:
    device = args.device or backends.default_device()
    if device == "cuda" and not backends.cuda_available():
        raise UsageError("--device cuda: no CUDA device on this machine")
    from ..judge.values import memory
    memory.judges_per_gpu()          # a malformed GAUNTLET_JUDGES_PER_GPU is a usage error, said before any judging
    check_sandbox(getattr(args, "sandbox", "auto"))
    return device


def check_sandbox(mode: str) -> None:
    """`--sandbox require` where the kernel cannot confine a worker, or on an interpreter whose packages differ
    from their install records, is refused before anything is judged."""
    from ..judge.process import environment
    from ..judge import sandbox
    try:
        sandbox.check_mode(mode)
    except sandbox.Unavailable as exc:
        raise UsageError(str(exc)) from None
    env = environment.verify()
    if not env["verified"]:
        what = ", ".join(env["modified"][:5]) or "no package's install record could be checked"
        if mode == "require":
            raise UsageError(f"--sandbox require: the interpreter is not the installed one: {what}")
        print(f"gauntlet: warning: package files differ from their install records: {what}", file=sys.stderr)


def evaluate_or_record(evaluate, problem, solution, opts):
    """A harness error on one candidate becomes that candidate's record; the suite goes on."""
    from ..executors import task
    return task.evaluate_or_record(evaluate, problem, solution, opts)


def peaks(problem, only=None) -> dict:
    """Measured in this (trusted) process before any candidate runs, or read from the judge's cache of this card's
    ceilings (gauntlet.judge.timing.peaks.cached_peaks). `only`: the dtypes the user asked for; None: every dtype."""
    from ..executors import task
    return task.measure_peaks_for(problem, only)
