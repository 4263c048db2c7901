"""`gauntlet run`: the suite, every solution on the search path, into a results file that a stopped run resumes."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import discover
from . import options, output, report
from ..discover import UsageError
from ..judge.records import interrupt, stopped, walls


def add(sub) -> None:
    p = sub.add_parser("run", help="the suite: every solution on the search path (the shipped ones and your "
                                   "own folders') of every (or the named) problem")
    p.add_argument("--problem", action="append", help="limit to these problems (repeatable)")
    p.add_argument("--solution", action="append", help="limit to these solution names (repeatable)")
    p.add_argument("--shipped", action="store_true",
                   help="where you have folders of your own (--problems, GAUNTLET_PROBLEMS, [tool.gauntlet]), "
                        "judge Gauntlet's shipped solutions too (default: only your own; a problem named with "
                        "--problem is judged with all of its solutions)")
    options.common_options(p)
    options.search_options(p)
    p.add_argument("--out", default="results/results.json", help="results file; resumed if it exists")
    p.add_argument("--fresh", action="store_true", help="start the results file over instead of resuming")
    p.add_argument("--all-shapes", action="store_true",
                   help=f"time every benchmark shape, a leaderboard's breadth (on cuda, run times the first "
                        f"{options.RUN_SHAPES} shape(s) of each dtype unless told otherwise)")
    p.add_argument("--report", metavar="DIR", help="also write the leaderboard into DIR")
    p.add_argument("--json", action="store_true",
                   help="print exactly one JSON object on stdout: the results document (harness/schemas/"
                        "run.schema.json), also when stopped early")
    options.executor_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..executors import task
    from ..judge.records.fingerprint import changed_parts, fingerprint
    from ..judge.records.results import EvalRecord, ResultsFile, describe_stages, stage_totals
    device = options.device(args)
    preset = options.run_preset(args, device)
    broken: dict[str, str] = {}
    if args.problem:
        problems = [discover.get_problem(p) for p in args.problem]
    else:
        problems, broken = discover.problems_and_errors()
        for name, error in broken.items():
            print(f"gauntlet run: problem {name!r} is not judged, its folder is broken (the problem author's to "
                  f"fix): {error}", file=sys.stderr)
    plan = [(p, s) for p in problems for s in discover.solutions_for(p.id)
            if not args.solution or s.name in args.solution]
    try:
        plan = _own(plan, discover.search_path(), args)
    except UsageError:
        if broken:       # nothing left of the user's own: the broken problem is the cause, said as its author's
            raise discover.ProblemError(next(iter(broken.values()))) from None
        raise
    if not plan:
        raise UsageError("nothing to run: no solution matches the filters")
    options.check_dtypes(tuple(args.dtype) if args.dtype else None, problems)
    plan = _entering(plan, args.dtype)
    if device == "cpu" and not args.examples:
        print(f"gauntlet run on the CPU: {options.CPU_RUN_EDGES} edge cases and {options.CPU_RUN_EXAMPLES} examples "
              "per dtype and no timing (a smoke check; "
              "--examples N for more, a GPU for speed figures)", file=sys.stderr)
    if preset:
        print(f"gauntlet run on cuda: every dtype's correctness in full; {'; '.join(preset)}", file=sys.stderr)
    executor = options.executor(args, device)
    results = ResultsFile(Path(args.out), output.env(device), resume=not args.fresh)
    results.doc["problem_errors"] = [{"problem": name, "blame": "problem", "error": error}
                                     for name, error in broken.items()]
    failed = len(broken)
    tally = {"resumed": 0, "re-judged": 0, "new": 0}
    keys = [f"{problem.id}/{solution.name}@{device}" for problem, solution in plan]
    settled: set[str] = set()          # resumed or judged in this run, in the results file
    judging: dict[str, float] = {}     # handed to a judge, no record yet: key -> when (monotonic)
    # For the rate and the time left on each progress line (gauntlet.cli.output.progress): the judgements finished
    # (their wall times) and those in flight (`judging`), and how many ran at once.
    clock = {"t0": time.monotonic(), "done": 0, "walls": [], "running": judging, "slots": 1}
    why: dict[int, tuple[str, str]] = {}   # plan index -> (tally entry, what the progress line says at its start)
    jobs = []
    ray = executor.kind == "ray"
    try:
        for i, (problem, solution) in enumerate(plan):
            key = keys[i]
            opts = options.judge_options(args, device)
            old = results.previous(key)
            fp = fingerprint(problem, solution, opts)
            if old is not None:
                changed = changed_parts(old.get("fingerprint"), fp)
                if not changed:
                    tally["resumed"] += 1
                    settled.add(key)
                    failed += old.get("verdict") not in ("pass", "unsupported")
                    output.progress(len(settled), len(plan), key,
                                    f"unchanged since it was judged: {old.get('verdict')} (resumed)")
                    continue
                why[i] = ("re-judged", f"re-judging: {', '.join(changed)} changed")
            else:
                why[i] = ("new", "running")
            jobs.append(task.make_job(i, problem, solution, opts, ship_source=ray, expect=fp if ray else None))

        # Longest first: by the walls of this machine's last run where kept (gauntlet.judge.records.walls).
        wall_keys = {job["index"]: walls.key(keys[job["index"]], job["options"]) for job in jobs}
        kept = walls.known()
        jobs = walls.longest_first(jobs, [_weight(*plan[job["index"]], args.dtype) for job in jobs],
                                   [kept.get(wall_keys[job["index"]]) for job in jobs])

        def started(job, where):
            judging[keys[job["index"]]] = time.monotonic()
            clock["slots"] = max(clock["slots"], len(judging))     # the executor's width, as seen
            on = f" on GPU {where['device']}" if where.get("device") else ""
            output.progress(len(settled), len(plan), keys[job["index"]], why[job["index"]][1] + on)

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
                judging.pop(keys[i], None)
                tally[why[i][0]] += 1
            failed += record.verdict not in ("pass", "unsupported")
            codes = ",".join(sorted({r["code"] for r in record.reasons}))
            clock["done"] += 1
            clock["walls"].append(result["wall_s"])
            walls.note({wall_keys[i]: result["wall_s"]})
            on = f" on GPU {result['where']['device']}" if result["where"].get("executor") in ("local", "ray") \
                and result["where"].get("device") else ""
            verdict = f"{record.verdict}{' (' + codes + ')' if codes else ''}"
            output.progress(len(settled), len(plan), keys[i], f"{verdict} in {result['wall_s']:.1f}s{on}", clock)
            for line in output.failure_lines(record):
                print(line, file=sys.stderr, flush=True)
        together = ""
        if device == "cuda":
            from ..executors.exclusive import timed_together
            together = f"; candidates timed on one card at once: {len(timed_together(results.doc['records']))}"
        stages = describe_stages(stage_totals(judged_now))
        if stages:
            print(stages, file=sys.stderr)
        print(f"results: {args.out} (resumed {tally['resumed']}, re-judged {tally['re-judged']}, "
              f"new {tally['new']}{together})", file=sys.stderr)
        results.complete()
        _run_report(args)
        if args.json:
            output.emit_json(results.doc)
    except interrupt.Interrupted as stop:
        return _stop_run(stop, args, results, keys, settled, judging, tally)
    finally:
        executor.close()
    return 1 if failed else 0


def _own(plan: list, sp, args) -> list:
    """Where the search path has folders of the user's own, `run` judges the solutions in them: in a kernel team's
    repository the suite is its kernels, and the 43 shipped ones beside them would be most of the run and of its
    failures' count. --shipped, or naming problems with --problem, judges everything found. A checkout of Gauntlet
    (no folders of its own on the search path) judges the shipped solutions: they are its suite."""
    if args.shipped or args.problem or not (sp.problems or sp.solutions):
        return plan
    mine = [(p, s) for p, s in plan if any(s.path.resolve().is_relative_to(root) for root in sp.solutions)]
    if not mine and sp.solutions:
        where = ", ".join(str(f) for f in sp.solutions)
        raise UsageError(f"nothing to run: your solutions folders ({where}) hold no solution"
                         f"{' matching --solution' if args.solution else ''}; add <problem>/<name>.py there, or "
                         "--shipped to judge Gauntlet's own")
    if not mine:
        beside = ", ".join(str(Path(folder).parent / "solutions") for folder in sp.problems)
        raise UsageError(f"nothing to run: there is no solutions folder beside your problems folder; add "
                         f"{beside}/<problem>/<name>.py, or --shipped to judge Gauntlet's own")
    if len(mine) < len(plan):
        print(f"gauntlet run: your {len(mine)} solution(s) only, of {len(plan)} on the search path (--shipped for "
              "Gauntlet's own too)", file=sys.stderr)
    return mine


def _entering(plan: list, wanted) -> list:
    """With --dtype, the solutions that enter at least one dtype asked for. A solution whose DTYPES (or whose
    problem's dtypes) leave them all out has nothing to be judged on: it is skipped, not a `nothing_judged` failure,
    since the run asked for a dtype the file never claimed; the run says which it skipped. Two are kept for the judge
    to fail as `nothing_judged`, whatever was asked: a DTYPES that enters none of its problem's dtypes (a broken file,
    not a narrow one), and one the parent cannot read (computed at import: the judge sees the real one)."""
    if not wanted:
        return plan
    skip = [_dtypes(p, s, None) and not _dtypes(p, s, wanted) for p, s in plan]
    kept = [job for job, out in zip(plan, skip) if not out]
    skipped = [f"{p.id}/{s.name}" for (p, s), out in zip(plan, skip) if out]
    if not kept:
        raise UsageError(f"nothing to run: no solution enters --dtype {', '.join(wanted)} (their DTYPES or their "
                         f"problem's dtypes leave it out: {_some(skipped)})")
    if skipped:
        print(f"gauntlet run: skipped {len(skipped)} solution(s) that do not enter --dtype {', '.join(wanted)} "
              f"(their DTYPES or their problem's dtypes leave it out): {_some(skipped)}", file=sys.stderr)
    return kept


def _dtypes(problem, solution, wanted) -> list:
    """The dtypes of `wanted` this solution is judged on: its problem's, narrowed by its DTYPES where it has one."""
    return [d for d in problem.dtypes if (not wanted or d in wanted)
            and (solution.dtypes is None or d in solution.dtypes)]


def _some(names: list, shown: int = 5) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


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
        output.emit_json(results.doc)
    return stop.status


def _run_report(args) -> None:
    """`run --report DIR`: the leaderboard of the results file; its table on stdout, unless stdout is the one
    JSON object (`--json`)."""
    if not args.report:
        return
    if args.json:
        from ..reports.leaderboard import build
        build([args.out], args.report)
    else:
        report.run(argparse.Namespace(results=[args.out], out_dir=args.report))


def _weight(problem, solution, wanted) -> int:
    """A judgement's expected length, relative, for a longest-first start (the records stay in the plan's order):
    its dtypes, twice for a file that compiles kernels of its own on each of them (Triton, CuTe). With 4 judges on a
    card the suite's tail is the last long judgements left running alone; starting the long ones first shortens it.
    This stand-in serves where no earlier wall is kept (a cold cache: gauntlet.judge.records.walls)."""
    return max(1, len(_dtypes(problem, solution, wanted))) * (2 if solution.backend in ("triton", "cute") else 1)
