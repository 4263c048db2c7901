"""The `gauntlet` command: list, eval, run, report, mutate.

Exit codes (scripts and agent loops depend on them): 0 pass, 1 rejected (any verdict but pass; for `run`, any
shipped solution that neither passed nor was unsupported), 2 usage error (unknown problem, missing file, bad flag),
130 stopped by SIGINT and 143 by SIGTERM (128 + the signal, as a shell reports it; harness.judge.interrupt).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harness import backends, discover
from harness.discover import UsageError
from harness.judge import bytecode, interrupt, stopped
from harness.problem import ProblemError


def main(argv: list[str] | None = None) -> int:
    if argv is None:                     # the `gauntlet` process itself (not a caller's, such as a test's)
        bytecode.use_in_this_process()   # before torch is imported: harness.judge.bytecode says why
    argv = sys.argv[1:] if argv is None else list(argv)
    want_json = "--json" in argv
    _undumpable()
    parser = _parser()
    if not argv:                         # bare `gauntlet`: what it can do, not "the following arguments are required"
        parser.print_help(sys.stderr)
        return 2
    _JSON_SAID[0] = False
    hint: list[str] = []

    def last_words():
        # A second signal ends the process at once: a --json caller still gets its one object, a run's user the
        # way back (the results file is whole: every write of it is atomic).
        if want_json:
            _emit_json(_interrupted_doc("a second signal came while stopping: stopped at once"))
        for line in hint:
            print(line, file=sys.stderr)

    with interrupt.handle(last_words):
        try:
            args = parser.parse_args(argv)
            args.argv = argv
            if args.command == "run":
                hint.append(f"gauntlet: what was judged is kept in {args.out}; resume with: "
                            f"{stopped.resume_command(argv)}")
            previous = discover.use(_search_path(args))
            try:
                _import_everything()
                return args.func(args)
            finally:
                discover.use(previous)
        except (UsageError, ProblemError, ValueError) as exc:
            # Whose fault: a problem file that breaks the contract is its author's; everything else is the user's.
            blame = "problem" if isinstance(exc, ProblemError) else "user"
            print(f"gauntlet: error: {exc}", file=sys.stderr)
            if want_json:
                _emit_json({"schema": "gauntlet.eval/1", "verdict": "usage_error", "blame": blame, "error": str(exc)})
            return 2
        except interrupt.Interrupted as stop:
            # Stopped outside a judgement (starting up, or after the verdict was printed): nothing to keep.
            print(f"gauntlet: stopped by {stop.name}", file=sys.stderr)
            if want_json:
                _emit_json(_interrupted_doc(f"stopped by {stop.name} before any judgement began"))
            return stop.status


_JSON_SAID = [False]     # --json: whether the one object has been printed (never a second, never half of one)


def _emit_json(doc: dict) -> None:
    with interrupt.held():
        if not _JSON_SAID[0]:
            sys.stdout.write(json.dumps(doc, default=str) + "\n")
            sys.stdout.flush()
            _JSON_SAID[0] = True


def _interrupted_doc(detail: str) -> dict:
    return {"schema": "gauntlet.eval/1", "verdict": "interrupted",
            "reasons": [{"code": "interrupted", "detail": detail, "repro": ""}]}


def _undumpable() -> None:
    """PR_SET_DUMPABLE 0 on the judge: a process of the same user without CAP_SYS_PTRACE (an unconfined
    candidate, `--sandbox off`) can then neither read nor write its memory (/proc/PID/mem) nor open its descriptors
    (/proc/PID/fd/1, its stdout). Every judge process does the same (harness.judge.executors.task)."""
    from harness.judge.executors import task
    task.undumpable()


class _Parser(argparse.ArgumentParser):
    """argparse that raises a UsageError instead of exiting, so `--json` still prints its one object."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gauntlet", description="Hold GPU kernels to a specification.",
                epilog="`gauntlet COMMAND --help` for a command's options; the README has the whole story.")
    p.add_argument("--version", action="version", version=f"gauntlet {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, title="commands", metavar="COMMAND")

    ls = sub.add_parser("list", help="problems, dtypes, solutions, and which backends this machine can run")
    _search(ls)
    ls.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    ls.set_defaults(func=cmd_list)

    ev = sub.add_parser("eval", help="judge one candidate file (or shipped solution name) on one problem")
    ev.add_argument("problem")
    ev.add_argument("file", help="a solution file path, or the name of a shipped solution")
    _common(ev)
    _search(ev)
    _formats(ev)
    ev.add_argument("--case", help="replay one case, as printed in a failure's repro line")
    ev.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    ev.set_defaults(func=cmd_eval)

    many = sub.add_parser("eval-many", help="judge many candidate files of one problem, one JSON line each "
                                            "(folders, .py files, JSON-lines files, - for standard input)")
    many.add_argument("problem")
    many.add_argument("sources", nargs="+", metavar="SOURCE",
                      help="a candidate .py file, a folder of them, a JSON-lines file ({\"path\": ...} or "
                           "{\"id\": ..., \"source\": ...} per line), or - (the same lines, or paths, on stdin)")
    _common(many)
    _search(many)
    _formats(many)
    many.add_argument("--out", help="also append the lines to this file; candidates already judged there with the "
                                    "same fingerprint are not judged again")
    many.add_argument("--screen", action="store_true",
                      help="a search's preset: 2 examples per dtype, one timed shape and, on cuda, --overlap 2 (unless given)")
    _executor_options(many)
    many.set_defaults(func=cmd_eval_many)

    run = sub.add_parser("run", help="the suite: every solution on the search path (the shipped ones and your "
                                     "own folders') of every (or the named) problem")
    run.add_argument("--problem", action="append", help="limit to these problems (repeatable)")
    run.add_argument("--solution", action="append", help="limit to these solution names (repeatable)")
    _common(run)
    _search(run)
    run.add_argument("--out", default="results/results.json", help="results file; resumed if it exists")
    run.add_argument("--fresh", action="store_true", help="start the results file over instead of resuming")
    run.add_argument("--report", metavar="DIR", help="also write the leaderboard into DIR")
    run.add_argument("--json", action="store_true",
                     help="print exactly one JSON object on stdout: the results document (harness/schemas/"
                          "run.schema.json), also when stopped early")
    _executor_options(run)
    run.set_defaults(func=cmd_run)

    mut = sub.add_parser("mutate", help="plant small bugs in a Triton solution's kernels and count how many the "
                                        "judge catches (a measure of the correctness net)")
    mut.add_argument("problem")
    mut.add_argument("file", help="a Triton solution file path, or the name of a shipped solution")
    _search(mut)
    mut.add_argument("--max", type=_positive, default=40, dest="max_mutants",
                     help="judge at most N mutants, chosen by --seed (default 40)")
    mut.add_argument("--seed", type=_seed, default=0, help="picks the mutants and seeds the fuzzing (default 0)")
    mut.add_argument("--examples", type=_positive, default=5,
                     help="Hypothesis examples per dtype, after the domain's edge cases (default 5)")
    mut.add_argument("--dtype", action="append", help="limit to these dtypes (repeatable)")
    mut.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="default: cpu")
    mut.add_argument("--timeout", type=_seconds, default=60.0, help="seconds allowed per call (default 60)")
    mut.add_argument("--operator", action="append", help="only these mutation operators (repeatable)")
    mut.add_argument("--list", action="store_true", help="print the chosen mutants and their diffs; judge nothing")
    mut.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    mut.set_defaults(func=cmd_mutate)

    cmp_ = sub.add_parser("compare", help="did a kernel get slower or wrong? two runs compared (results files, "
                                          "eval --json output or eval-many lines); exit 1 on a regression")
    cmp_.add_argument("base", help="the reference run (e.g. the main branch's stored results)")
    cmp_.add_argument("new", help="the run to judge")
    cmp_.add_argument("--fail-on", type=float, default=5.0, metavar="PCT",
                      help="a slowdown beyond PCT percent whose 95%% interval excludes no change is a regression "
                           "(default 5)")
    cmp_.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    cmp_.add_argument("--markdown", metavar="FILE", help="also write the Markdown (a PR comment) to FILE")
    cmp_.set_defaults(func=cmd_compare)

    rep = sub.add_parser("report", help="leaderboard (Markdown + HTML) from results files")
    rep.add_argument("results", nargs="+", metavar="RESULTS.json",
                     help="results files written by `gauntlet run --out`, `gauntlet eval --json` output or "
                          "`gauntlet eval-many` lines (a later file's record of the same problem/solution/device "
                          "replaces an earlier one's; different GPUs are ranked apart)")
    rep.add_argument("-o", "--out-dir", default="reports/out",
                     help="where leaderboard.md and leaderboard.html are written (default reports/out)")
    rep.add_argument("--json", action="store_true", help="print one JSON object (the files written), no table")
    rep.add_argument("--compare", action="store_true",
                     help="with exactly two files, BASE then NEW: both pages also carry `gauntlet compare BASE NEW`'s "
                          "table (the leaderboard shows NEW over BASE; the exit status stays 0: use `gauntlet "
                          "compare` to gate CI)")
    rep.add_argument("--fail-on", type=float, default=None, metavar="PCT",
                     help="with --compare: the slowdown, in percent, beyond which a real one is flagged (default 5)")
    rep.set_defaults(func=cmd_report)
    return p


def _formats(p: argparse.ArgumentParser) -> None:
    """--format and --backend: how a file of the field's other formats is read (harness.formats; README, "Other
    formats")."""
    from harness import formats
    p.add_argument("--format", choices=("auto",) + formats.FORMATS, default="auto",
                   help="the candidate file's format: native (BACKEND + solve), kernelbench (class ModelNew), "
                        "gpumode (custom_kernel(data)); default auto: found from the names the file defines")
    p.add_argument("--backend", choices=discover.BACKENDS,
                   help="the backend of a KernelBench or GPU MODE file (default: detected from what it uses, "
                        "else a BACKEND line in it); a native file declares its own")


def _executor_options(p: argparse.ArgumentParser) -> None:
    """Where `run` and `eval-many` judge (harness.judge.executors); the results are the same wherever."""
    p.add_argument("--gpus", metavar="N|all",
                   help="judge on N GPUs of this host at once (all: every visible one): one judge process per GPU, "
                        "one candidate per GPU at a time; on a CPU, N logical slots (all: GAUNTLET_LOGICAL_GPUS)")
    p.add_argument("--overlap", type=int, default=None, metavar="K",
                   help="K judges per GPU (default 1; eval-many --screen on cuda: 2): their correctness phases run "
                        "side by side, each timing with the card alone; each judge gets 1/K of the GPU's memory")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: this host (default); ray: one Ray task per candidate, on the cluster at --address "
                        "or a local one (pip install 'gauntlet[ray]')")
    p.add_argument("--address", help="with --executor ray: the cluster's address (as `ray start --head` prints "
                                     "it; default RAY_ADDRESS, else a new local cluster)")


def _executor(args, device: str):
    from harness.judge import executors
    return executors.make(args.executor, device, args.gpus, args.address, args.overlap or 1)


def _search(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", action="append", metavar="PATH",
                   help="a folder of problem folders, searched before the shipped ones (repeatable; replaces "
                        "GAUNTLET_PROBLEMS and [tool.gauntlet] problems in pyproject.toml)")
    p.add_argument("--solutions", action="append", metavar="PATH",
                   help="a folder of <problem>/<name>.py solutions (repeatable; default: the solutions/ folder "
                        "beside each problems folder)")


def _search_path(args):
    """The search path for commands that take --problems; None (resolved on use) for the others."""
    if not hasattr(args, "problems"):
        return None
    from harness import searchpath
    return searchpath.resolve(problems=args.problems, solutions=args.solutions)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", action="append", help="limit to these dtypes (repeatable)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda if there is a GPU, else cpu")
    p.add_argument("--examples", type=_positive, default=None, help="Hypothesis examples per dtype")
    p.add_argument("--seed", type=_seed, help="fix the fuzzing seed, 0 <= seed < 2**31 (default: fresh, recorded)")
    p.add_argument("--no-timing", action="store_true", help="judge correctness only")
    p.add_argument("--timeout", type=_seconds, default=180.0, help="seconds allowed per call (default 180)")
    p.add_argument("--max-shapes", type=_positive, help="time only the first N benchmark shapes of each problem")
    p.add_argument("--sandbox", choices=("require", "auto", "off"), default="auto",
                   help="OS confinement of the workers: require (refuse to judge without it), auto (what the kernel "
                        "offers, recorded; default), off (resource bounds only)")
    p.add_argument("--time-limit", type=_seconds, default=3600.0, dest="time_limit",
                   help="total seconds one judgement's candidate workers may take (default 3600)")


def _number(text: str, kind, what: str):
    """argparse names a failed `type=` by the function's name ("invalid _positive value"); say what was wanted."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


def _positive(text: str) -> int:
    value = _number(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _seed(text: str) -> int:
    value = _number(text, int, "an integer in [0, 2**31)")
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**31), got {value}")
    return value


def _seconds(text: str) -> float:
    value = _number(text, float, "a number of seconds in (0, 86400]")
    if not 0 < value <= 24 * 3600:       # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, 86400], got {text}")
    return value


def _version() -> str:
    from importlib import metadata
    try:
        return metadata.version("gauntlet")
    except metadata.PackageNotFoundError:
        return "unknown (not installed: a plain checkout)"


def _options(args, device: str):
    from harness.judge.evaluate import Options
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


def _check_format(problem, solution, backend) -> None:
    """The user's pairing, refused before anything runs: a KernelBench file on a problem without a KernelBench
    mapping, or --backend for a native file (which declares its own). What is wrong with the file itself is the
    candidate's, a verdict (import_error)."""
    from harness import formats
    unmatched = formats.problem_support(problem, solution.format)
    if unmatched and not solution.error:
        raise UsageError(f"{solution.path}: {unmatched}")
    if backend and solution.format == "native" and solution.backend != backend:
        raise UsageError(f"--backend {backend} is for KernelBench and GPU MODE files; {solution.path} is a native "
                         f"solution, which declares BACKEND = {solution.backend!r}")


def _check_dtypes(dtypes, problems) -> None:
    """An unknown --dtype is the user's error (with the known ones), found before anything is judged."""
    for name in dtypes or ():
        if not any(name in p.dtypes for p in problems):
            known = sorted({d for p in problems for d in p.dtypes})
            raise UsageError(f"unknown dtype {name!r}; known: {', '.join(known)}")


CPU_RUN_EXAMPLES = 2
CPU_RUN_EDGES = 2


def _device(args) -> str:
    device = args.device or backends.default_device()
    if device == "cuda" and not backends.cuda_available():
        raise UsageError("--device cuda: no CUDA device on this machine")
    from harness.judge import memory
    memory.judges_per_gpu()          # a malformed GAUNTLET_JUDGES_PER_GPU is a usage error, said before any judging
    _check_sandbox(getattr(args, "sandbox", "auto"))
    return device


def _check_sandbox(mode: str) -> None:
    """`--sandbox require` where the kernel cannot confine a worker, or on an interpreter whose packages differ
    from their install records, is refused before anything is judged."""
    from harness.judge import environment, sandbox
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


# --- commands --------------------------------------------------------------------------------------------------

def cmd_list(args) -> int:
    doc = _listing()
    if args.json:
        _emit_json(doc)
    else:
        _print_listing(doc)
    if doc["broken"]:
        print(f"gauntlet: {len(doc['broken'])} problem(s) could not be loaded", file=sys.stderr)
        return 2
    return 0


def _listing() -> dict:
    """What `list` says, as data: backends per device, the search path, every problem with its solutions, and the
    problems that could not be loaded (one broken problem.yaml is its author's error, said in its place; the rest
    are still listed)."""
    devices = ["cpu"] + (["cuda"] if backends.cuda_available() else [])
    doc = {"schema": "gauntlet.list/1", "backends": {}, "problems": [], "broken": []}
    for b in discover.BACKENDS:
        doc["backends"][b] = {}
        for d in devices:
            ok, why = backends.status(b, d)
            doc["backends"][b][d] = {"ok": bool(ok), "why": why or ""}
    for pid, where in discover.locate_problems().items():
        try:
            problem = discover.get_problem(pid)
        except (ProblemError, UsageError, ValueError) as exc:
            doc["broken"].append({"id": pid, "folder": str(where.folder), "error": str(exc)})
            continue
        doc["problems"].append({
            "id": problem.id, "title": problem.title, "folder": str(where.folder), "shipped": bool(where.shipped),
            "shadows": bool(where.shadows), "dtypes": list(problem.dtypes), "baselines": dict(problem.baselines),
            "solutions": [{"name": s.name, "backend": s.backend, "dtypes": list(s.dtypes) if s.dtypes else None,
                           "path": str(s.path)} for s in discover.solutions_for(problem.id)]})
    return doc


def _print_listing(doc: dict) -> None:
    print("backends on this machine:")
    for b, by_device in doc["backends"].items():
        cells = [f"{d}: {'yes' if c['ok'] else 'no (' + c['why'] + ')'}" for d, c in by_device.items()]
        print(f"  {b:<7} " + "; ".join(cells))
    print()
    _print_search_path(discover.search_path())
    for broken in doc["broken"]:
        print(f"{broken['id']}: cannot be loaded (the problem's error): {broken['error']}")
    for p in doc["problems"]:
        print(f"{p['id']}: {p['title']}")
        if not p["shipped"]:
            print(f"  folder:    {p['folder']}" + (f" (shadows the shipped {p['id']})" if p["shadows"] else ""))
        print(f"  dtypes:    {', '.join(p['dtypes'])}")
        print(f"  baselines: {', '.join(f'{k}={v}' for k, v in p['baselines'].items())}")
        for sol in p["solutions"]:
            dt = f"  dtypes {','.join(sol['dtypes'])}" if sol["dtypes"] else ""
            print(f"  - {sol['name']:<22} {sol['backend'] or '?':<7}{dt}")


def cmd_eval(args) -> int:
    from harness.judge.evaluate import evaluate
    device = _device(args)
    problem = discover.get_problem(args.problem)
    solution = discover.get_solution(problem.id, args.file, fmt=args.format, backend=args.backend)
    _check_format(problem, solution, args.backend)
    opts = _options(args, device)
    _check_dtypes(opts.dtypes, [problem])
    if opts.case:
        from harness.judge import fuzz
        widest = max(problem.dtypes[d].torch_dtype().itemsize for d in (opts.dtypes or problem.dtypes))
        fuzz.check_case(opts.case, problem, device, widest)      # a usage error, before any process starts
    if device == "cuda" and opts.timing and not opts.case:
        opts.peaks = _peaks(problem, opts.dtypes)
    status = None
    try:
        record = _evaluate_or_record(evaluate, problem, solution, opts)
    except interrupt.Interrupted as stop:
        record = stopped.eval_record(problem.id, solution.name, str(solution.path), solution.backend, device,
                                     stop.name)
        status = stop.status
    if args.json:
        _emit_json(dict(record.to_json(), environment=_env(device), peaks=opts.peaks))
    else:
        _print_record(record)
    return status or (0 if record.verdict == "pass" else 1)


def cmd_eval_many(args) -> int:
    """harness.judge.many: each candidate judged as `eval` judges it, in this process or on the executor's judges
    (--gpus, --executor ray); lines on stdout, in the candidates' order."""
    from harness.judge import many
    device = _device(args)
    problem = discover.get_problem(args.problem)
    if args.screen:
        args.examples = args.examples or 2
        args.max_shapes = args.max_shapes or 1
        if args.overlap is None and device == "cuda" and args.executor != "ray":
            args.overlap = 2          # measured on an H100: 60 candidates at 717/h per GPU (README)
    opts = _options(args, device)
    _check_dtypes(opts.dtypes, [problem])
    candidates = many.collect(args.sources, sys.stdin)
    executor = _executor(args, device)
    lines = many.Lines(sys.stdout, Path(args.out) if args.out else None)
    run = many.Run(len(candidates), device, _env(device), gpus=executor.gpus, executor=executor.kind)
    try:
        # The device's ceilings are measured by each judge process once, before its first candidate runs.
        many.judge_all(problem, candidates, opts, lines, executor, run, fmt=args.format, backend=args.backend,
                       progress=lambda i, n, what: _progress(i, n, problem.id, what,
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


def cmd_run(args) -> int:
    from harness.judge.executors import task
    from harness.judge.fingerprint import changed_parts, fingerprint
    from harness.judge.results import EvalRecord, ResultsFile, describe_stages, stage_totals
    device = _device(args)
    problems = [discover.get_problem(p) for p in args.problem] if args.problem else discover.all_problems()
    plan = [(p, s) for p in problems for s in discover.solutions_for(p.id)
            if not args.solution or s.name in args.solution]
    if not plan:
        raise UsageError("nothing to run: no solution matches the filters")
    _check_dtypes(tuple(args.dtype) if args.dtype else None, problems)
    if device == "cpu" and not args.examples:
        print(f"gauntlet run on the CPU: {CPU_RUN_EDGES} edge cases and {CPU_RUN_EXAMPLES} examples per dtype and "
              "no timing (a smoke check; "
              "--examples N for more, a GPU for speed figures)", file=sys.stderr)
    executor = _executor(args, device)
    results = ResultsFile(Path(args.out), _env(device), resume=not args.fresh)
    failed = 0
    tally = {"resumed": 0, "re-judged": 0, "new": 0}
    clock = {"t0": time.monotonic(), "done": 0}     # for the rate and the time left on each progress line
    keys = [f"{problem.id}/{solution.name}@{device}" for problem, solution in plan]
    settled: set[str] = set()          # resumed or judged in this run, in the results file
    judging: set[str] = set()          # handed to a judge, no record yet
    why: dict[int, tuple[str, str]] = {}   # plan index -> (tally entry, what the progress line says at its start)
    jobs = []
    ray = executor.kind == "ray"
    try:
        for i, (problem, solution) in enumerate(plan):
            key = keys[i]
            opts = _options(args, device)
            old = results.previous(key)
            fp = fingerprint(problem, solution, opts)
            if old is not None:
                changed = changed_parts(old.get("fingerprint"), fp)
                if not changed:
                    tally["resumed"] += 1
                    settled.add(key)
                    failed += old.get("verdict") not in ("pass", "unsupported")
                    _progress(len(settled), len(plan), key,
                              f"unchanged since it was judged: {old.get('verdict')} (resumed)")
                    continue
                why[i] = ("re-judged", f"re-judging: {', '.join(changed)} changed")
            else:
                why[i] = ("new", "running")
            jobs.append(task.make_job(i, problem, solution, opts, ship_source=ray, expect=fp if ray else None))

        def started(job, where):
            judging.add(keys[job["index"]])
            on = f" on GPU {where['device']}" if where.get("device") else ""
            _progress(len(settled), len(plan), keys[job["index"]], why[job["index"]][1] + on)

        judged_now: list = []              # this run's judgements (not the resumed ones): where their time went
        for job, result in executor.run(jobs, on_start=started):
            i = job["index"]
            record = EvalRecord(**result["record"])
            judged_now.append(result["record"])
            with interrupt.held():         # the record and its bookkeeping land together, or neither does
                if result["peaks"] and any(results.doc.get("peaks", {}).get(k) != v
                                           for k, v in result["peaks"].items()):
                    results.doc["peaks"] = {**results.doc.get("peaks", {}), **result["peaks"]}
                results.add(record, order=keys)     # in the plan's order, whatever order judgements finish in
                settled.add(keys[i])
                judging.discard(keys[i])
                tally[why[i][0]] += 1
            failed += record.verdict not in ("pass", "unsupported")
            codes = ",".join(sorted({r["code"] for r in record.reasons}))
            clock["done"] += 1
            on = f" on GPU {result['where']['device']}" if result["where"].get("executor") in ("local", "ray") \
                and result["where"].get("device") else ""
            _progress(len(settled), len(plan), keys[i], f"{record.verdict}{' (' + codes + ')' if codes else ''} "
                                                        f"in {result['wall_s']:.1f}s{on}", clock)
        together = ""
        if device == "cuda":
            from harness.judge.executors.exclusive import timed_together
            together = f"; candidates timed on one card at once: {len(timed_together(results.doc['records']))}"
        stages = describe_stages(stage_totals(judged_now))
        if stages:
            print(stages, file=sys.stderr)
        print(f"results: {args.out} (resumed {tally['resumed']}, re-judged {tally['re-judged']}, "
              f"new {tally['new']}{together})", file=sys.stderr)
        results.complete()
        _run_report(args)
        if args.json:
            _emit_json(results.doc)
    except interrupt.Interrupted as stop:
        return _stop_run(stop, args, results, keys, settled, judging, tally)
    finally:
        executor.close()
    return 1 if failed else 0


def _stop_run(stop, args, results, keys, settled, in_flight, tally) -> int:
    """After the first SIGINT/SIGTERM of a run (its workers already killed): mark the results file, write the
    leaderboard from what was judged, and say in one line what was and was not judged and how to resume.
    `tally` counts only what has a record from this run (or was resumed); `in_flight`: the keys being judged."""
    abandoned = ", ".join(k for k in keys if k in in_flight) or None
    mark = stopped.run_mark(stop.name, keys, settled, abandoned, stopped.resume_command(args.argv))
    judged = dict(tally)
    results.mark_interrupted(mark)
    _run_report(args)
    print(stopped.run_line(mark, len(keys), judged, args.out), file=sys.stderr, flush=True)
    if args.json:
        _emit_json(results.doc)
    return stop.status


def _run_report(args) -> None:
    """`run --report DIR`: the leaderboard of the results file; its table on stdout, unless stdout is the one
    JSON object (`--json`)."""
    if not args.report:
        return
    if args.json:
        from reports.leaderboard import build
        build([args.out], args.report)
    else:
        cmd_report(argparse.Namespace(results=[args.out], out_dir=args.report))


def cmd_compare(args) -> int:
    """reports.compare: a regression is a slowdown beyond --fail-on whose interval says it is real, or a pass
    that is no longer one. Exit 1 on any, 0 otherwise."""
    from reports import compare
    if not 0 <= args.fail_on < 1000:
        raise UsageError(f"--fail-on must be a percentage in [0, 1000), got {args.fail_on}")
    doc = compare.compare(compare.load(Path(args.base)), compare.load(Path(args.new)), args.fail_on)
    text = compare.markdown(doc, (args.base, args.new))
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        _emit_json(doc)
    else:
        print(text)
    return 1 if doc["regressions"] else 0


def cmd_report(args) -> int:
    from reports.leaderboard import build, markdown_table, read_run
    compare = getattr(args, "compare", False)      # `run --report` calls this with results and out_dir only
    if compare and len(args.results) != 2:
        raise UsageError(f"--compare takes exactly two results files, BASE then NEW; got {len(args.results)}")
    fail_on = getattr(args, "fail_on", None)
    if fail_on is not None and not compare:
        raise UsageError("--fail-on is a threshold of --compare: give both, or neither")
    fail_on = 5.0 if fail_on is None else fail_on
    if not 0 <= fail_on < 1000:
        raise UsageError(f"--fail-on must be a percentage in [0, 1000), got {fail_on}")
    out = build(args.results, args.out_dir, compare=compare, fail_on=fail_on)
    if getattr(args, "json", False):
        _emit_json({"schema": "gauntlet.report/1", "markdown": str(out["markdown"]), "html": str(out["html"]),
                    "rows": out["rows"],
                    "regressions": len(out["compare"]["regressions"]) if out["compare"] is not None else None})
        return 0
    print(markdown_table([read_run(Path(p)) for p in args.results]))
    print(f"\nwrote {out['markdown']} and {out['html']}", file=sys.stderr)
    return 0


def cmd_mutate(args) -> int:
    """Exit 0 when every judged mutant was caught, 1 when one escaped or the original itself fails."""
    from harness.judge import mutants, mutate
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
            _emit_json({"schema": mutate.SCHEMA, "problem": problem.id, "solution": solution.name,
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
        _emit_json(report)
    else:
        print(mutate.render(report))
    return 0 if report["verdict"] == "all_caught" else 1


# --- helpers ---------------------------------------------------------------------------------------------------

def _import_everything() -> None:
    """Import all judge-side code before any candidate runs: a candidate that rewrote a harness or report file
    on disk must not get its code imported into this (trusted) process later in the run."""
    from harness.judge.executors import task
    task.import_judge_code()


def _print_search_path(sp) -> None:
    """Where problems and solutions were looked for, and why (harness.searchpath has the rules)."""
    origins = dict(sp.origins)
    for key in ("problems", "solutions"):
        mine = [str(p) for p in getattr(sp, key)]
        mine = [", ".join(mine) + f" ({origins[key]})"] if mine else []
        print(f"{key} from: " + ("; ".join(mine + (["shipped"] if sp.shipped else [])) or "nowhere"))
    print()


def _evaluate_or_record(evaluate, problem, solution, opts):
    """A harness error on one candidate becomes that candidate's record; the suite goes on."""
    from harness.judge.executors import task
    return task.evaluate_or_record(evaluate, problem, solution, opts)


def _peaks(problem, only=None) -> dict:
    """Measured in this (trusted) process before any candidate runs, or read from the judge's cache of this card's
    ceilings (harness.judge.peaks.cached_peaks). `only`: the dtypes the user asked for; None: every dtype."""
    from harness.judge.executors import task
    return task.measure_peaks_for(problem, only)


def _env(device: str) -> dict:
    from harness.judge.results import environment
    return environment(device)


def _progress(i: int, n: int, key: str, what: str, clock: dict | None = None) -> None:
    """One line on stderr per step of a long command. With `clock` ({"t0": monotonic start, "done": how many
    finished, set by the caller}), a finished step also says the rate and about how long is left, from the steps
    judged so far (resumed ones cost nothing and are not counted)."""
    width = 24
    filled = int(width * i / n)
    tail = ""
    if clock and clock.get("done"):
        elapsed = time.monotonic() - clock["t0"]
        per = elapsed / clock["done"]
        left = per * (n - i)
        tail = f"  [{3600 / per:.0f}/h, about {_duration(left)} left]" if per > 0 and i < n else \
            f"  [{3600 / per:.0f}/h]" if per > 0 else ""
    print(f"[{'#' * filled}{'.' * (width - filled)}] {i}/{n} {key}: {what}{tail}", file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _print_record(record) -> None:
    print(f"{record.problem} / {record.solution} [{record.backend or 'no BACKEND'}] on {record.device}: "
          f"{record.verdict.upper()}")
    if record.adapter:
        from harness import formats
        print(f"  judged as {formats.LABELS.get(record.format, record.format)}: {record.adapter.get('mapping')}")
        if record.adapter.get("backend_from"):
            print(f"  backend {record.adapter.get('backend') or 'none'} ({record.adapter['backend_from']})")
    for name, c in record.cases.items():
        print(f"  {name:<9} {c['examples']} examples, {c['calls']} calls: {c['status']}")
        for kernel in (k for k in c.get("kernels", []) if "[autotune:" in k):   # which config the CPU ran
            print(f"  {'':<9} ran {kernel}")
    for name, why in record.skipped.items():
        print(f"  {name:<9} skipped: {why}")
    for r in record.reasons:
        print(f"  [{r['code']}] {r['detail']}")
        if r.get("repro"):
            print(f"    replay: {r['repro']}")
    for t in record.timings:
        shape = "x".join(str(v) for v in t["shape"].values())
        base = "  ".join(f"{k} {b['speedup']:.2f}x [{b['ci95'][0]:.2f},{b['ci95'][1]:.2f}]"
                         for k, b in t["baselines"].items())
        print(f"  {t['dtype']:<9} {shape:<18} {t['candidate_ms']:.4f} ms  {t['tflops']:.1f} TFLOP/s  {base}")
    conf = (record.confinement or {}).get("candidate") or {}
    if conf:
        state = "verified" if conf.get("verified") else "NOT verified"
        print(f"  sandbox {conf.get('mode')}: Landlock ABI {conf.get('landlock_abi') or 'none'}, "
              f"seccomp {'on' if conf.get('seccomp') else 'off'}, capabilities {conf.get('capabilities')} ({state})")
    print(f"  seed {record.seed}, {record.elapsed_s:.1f}s")


if __name__ == "__main__":
    sys.exit(main())
