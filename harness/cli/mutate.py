"""`gauntlet mutate`: plant small bugs in a Triton solution's kernels and count how many the judge catches."""
from __future__ import annotations

import sys

from .. import backends, discover
from . import options, output
from ..discover import UsageError


def add(sub) -> None:
    mut = sub.add_parser("mutate", help="plant small bugs in a Triton solution's kernels and count how many the "
                                        "judge catches (a measure of the correctness net)")
    mut.add_argument("problem")
    mut.add_argument("file", help="a Triton solution file path, or the name of a shipped solution")
    options.search_options(mut)
    mut.add_argument("--max", type=options.positive, default=40, dest="max_mutants",
                     help="judge at most N mutants, chosen by --seed (default 40)")
    mut.add_argument("--seed", type=options.seed, default=0, help="picks the mutants and seeds the fuzzing (default 0)")
    mut.add_argument("--examples", type=options.positive, default=5,
                     help="Hypothesis examples per dtype, after the domain's edge cases (default 5)")
    mut.add_argument("--dtype", action="append", help="limit to these dtypes (repeatable)")
    mut.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="default: cpu")
    mut.add_argument("--timeout", type=options.seconds, default=60.0, help="seconds allowed per call (default 60)")
    mut.add_argument("--operator", action="append", help="only these mutation operators (repeatable)")
    mut.add_argument("--list", action="store_true", help="print the chosen mutants and their diffs; judge nothing")
    mut.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    mut.set_defaults(func=run)


def run(args) -> int:
    """Exit 0 when every judged mutant was caught, 1 when one escaped or the original itself fails."""
    from ..mutate import mutants, mutate
    if args.device == "cuda" and not backends.cuda_available():
        raise UsageError("--device cuda: no CUDA device on this machine")
    problem = discover.get_problem(args.problem)
    solution = discover.get_solution(problem.id, args.file)
    unknown = [op for op in args.operator or () if op not in mutants.OPERATORS]
    if unknown:
        raise UsageError(f"unknown mutation operator(s) {unknown}; known: {', '.join(mutants.OPERATORS)}")
    settings = mutate.Settings(device=args.device, examples=args.examples, seed=args.seed,
                               max_mutants=args.max_mutants, dtypes=tuple(args.dtype) if args.dtype else None,
                               timeout_s=args.timeout, operators=tuple(args.operator or mutants.OPERATORS))
    if args.list:
        chosen, produced = mutate.plan(solution, settings)
        original = solution.path.read_text()
        if args.json:
            output.emit_json({"schema": mutate.SCHEMA, "problem": problem.id, "solution": solution.name,
                              "produced": produced, "mutants": [
                                  {"id": i, "operator": m.operator, "description": m.description, "line": m.line,
                                   "function": m.function, "diff": m.diff(original, solution.path.name)}
                                  for i, m in enumerate(chosen)]})
        else:
            print(f"{len(chosen)} of {produced} mutants (seed {args.seed}):")
            for i, m in enumerate(chosen):
                print(f"\n#{i} {m.operator} (line {m.line}, {m.function}): {m.description}")
                print(m.diff(original, solution.path.name).rstrip())
        return 0

    def progress(i, n, entry):
        codes = ",".join(entry["codes"])
        print(f"[{i}/{n}] line {entry['line']} {entry['operator']}: {entry['outcome']}"
              f"{' (' + codes + ' on ' + entry['dtype'] + ')' if codes else ''} in {entry['elapsed_s']:.1f}s",
              file=sys.stderr, flush=True)

    report = mutate.run(problem, solution, settings, progress=progress)
    if args.json:
        output.emit_json(report)
    else:
        print(mutate.render(report))
    return 0 if report["verdict"] == "all_caught" else 1
