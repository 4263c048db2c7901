"""`gauntlet eval-many`: many candidate files of one problem, one JSON line each (gauntlet.executors.many)."""
from __future__ import annotations

import sys
from pathlib import Path

from .. import discover
from . import options, output
from ..judge.records import interrupt


def add(sub) -> None:
    many = sub.add_parser("eval-many", help="judge many candidate files of one problem, one JSON line each "
                                            "(folders, .py files, JSON-lines files, - for standard input)")
    many.add_argument("problem")
    many.add_argument("sources", nargs="+", metavar="SOURCE",
                      help="a candidate .py file, a folder of them, a JSON-lines file ({\"path\": ...} or "
                           "{\"id\": ..., \"source\": ...} per line), or - (the same lines, or paths, on stdin)")
    options.common_options(many)
    options.search_options(many)
    options.formats_option(many)
    many.add_argument("--out", help="also append the lines to this file; candidates already judged there with the "
                                    "same fingerprint are not judged again")
    many.add_argument("--screen", action="store_true",
                      help="a search's preset: 2 examples per dtype, one timed shape and, on cuda, --overlap 2 "
                           "(unless given)")
    options.executor_options(many)
    many.set_defaults(func=run)


def run(args) -> int:
    """gauntlet.executors.many: each candidate judged as `eval` judges it, in this process or on the executor's judges
    (--gpus, --executor ray); lines on stdout, in the candidates' order."""
    from ..executors import many
    device = options.device(args)
    problem = discover.get_problem(args.problem)
    if args.screen:
        args.examples = args.examples or 2
        args.max_shapes = args.max_shapes or 1
        if args.overlap is None and device == "cuda" and args.executor != "ray":
            args.overlap = 2          # correctness side by side, each timed shape alone (docs/benchmarks.md: rates)
    opts = options.judge_options(args, device)
    options.check_dtypes(opts.dtypes, [problem])
    candidates = many.collect(args.sources, sys.stdin)
    executor = options.executor(args, device)
    lines = many.Lines(sys.stdout, Path(args.out) if args.out else None)
    run = many.Run(len(candidates), device, output.env(device), gpus=executor.gpus, executor=executor.kind)
    try:
        # The device's ceilings are measured by each judge process once, before its first candidate runs.
        many.judge_all(problem, candidates, opts, lines, executor, run, fmt=args.format, backend=args.backend,
                       progress=lambda i, n, what: output.progress(i, n, problem.id, what,
                                                                   {"t0": run.t0, "done": run.tally["judged"]}),
                       ship_source=executor.kind == "ray")
    except interrupt.Interrupted as stop:
        lines.write(run.summary(stopped=stop.name))
        print(f"gauntlet: eval-many stopped by {stop.name} after {run.tally['judged'] + run.tally['resumed']} of "
              f"{run.total}" + (f"; resume with the same command (--out {args.out} keeps what was judged)"
                                if args.out else "; with --out FILE a second run resumes"), file=sys.stderr)
        return stop.status
    finally:
        executor.close()
    lines.write(run.summary())
    return 0
