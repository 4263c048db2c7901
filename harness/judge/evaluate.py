"""Judge one candidate on one problem: fuzz for correctness per dtype, then (on cuda) time against the baselines.

This module is the trusted side. It regenerates every input itself from the seed it sent, computes the oracle and
torch's own answer, and compares what came back from the child. Everything the child says is data.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field


from .. import backends, formats
from ..discover import SolutionInfo
from .calls import Judge
from .correctness import fuzz_dtype
from .process import audit, bytecode, environment, standby
from .process.isolate import Child, ChildFailed, close_all
from .process.watchdog import TimeBudget
from .records import fingerprint
from .records.results import EvalRecord
from .records.stages import Stages
from .timing import scoring, timed, turns
from ..problem import Problem
from ..reasons import Reason, verdict_of


@dataclass
class Options:
    device: str = "cpu"
    dtypes: tuple | None = None          # None: every dtype the problem and the solution share
    examples: int = 20                   # Hypothesis examples per dtype
    seed: int | None = None              # None: a fresh one, recorded in the result
    case: str | None = None              # replay one case instead of fuzzing ("M=..,N=..,K=..,seed=..")
    timing: bool = True                  # time on cuda after a pass
    case_timeout_s: float = 180.0
    timing_budget_s: float = 15.0        # per benchmark shape and dtype
    shrink: bool = True
    shapes: list | None = None           # override the benchmark shapes (tests, quick runs)
    max_shapes: int | None = None        # time only the first N benchmark shapes
    max_edges: int | None = None         # judge only the first N edge cases (the CPU smoke run); None: all
    sandbox: str = "auto"                # OS confinement of the workers: require | auto | off (judge/sandbox)
    time_limit_s: float | None = 3600.0  # total time the candidate's workers may take answering, per judgement
    peaks: dict = field(default_factory=dict)   # measured ceilings on this device (timing.measure_peaks)
    # Where failing cases are kept and replayed from first (gauntlet.judge.values.failures); None: the project's
    # .gauntlet/failures. `gauntlet mutate` points it at a temporary folder: its mutants' cases name files about to go.
    failures_dir: str | None = None


def evaluate(problem: Problem, solution: SolutionInfo, opts: Options) -> EvalRecord:
    t0 = time.monotonic()
    record = EvalRecord(problem=problem.id, solution=solution.name, path=str(solution.path),
                        backend=solution.backend, device=opts.device, format=solution.format)
    if solution.adapter:
        record.adapter = dict(solution.adapter, mapping=formats.describe_mapping(problem, solution.format))
    record.seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2**31)
    record.fingerprint = fingerprint.fingerprint(problem, solution, opts)
    env = environment.verify()
    if not env["verified"]:
        record.environment_modified = env["modified"] or ["no package's install record could be checked"]
    dtypes = _select_dtypes(problem, solution, opts, record)
    problem.module()                    # imported by the judge before any candidate code runs
    record.static_notes = audit.static_notes(solution.path)
    ok, why = backends.status(solution.backend, opts.device)
    unmatched = formats.problem_support(problem, solution.format)
    if solution.error:
        record.reasons.append(Reason("import_error", solution.error).to_json())
    elif solution.unsupported or unmatched:
        # Not the candidate's failure: a kind of file, or a pairing of format and problem, Gauntlet cannot judge.
        # (`gauntlet eval` refuses the pairing as a usage error before it gets here.)
        record.reasons.append(Reason("unsupported", solution.unsupported or unmatched).to_json())
    elif not ok:
        code = "unsupported" if solution.backend in backends.BACKENDS else "import_error"
        record.reasons.append(Reason(code, why).to_json())
    elif not dtypes:
        record.reasons.append(_nothing_judged(problem, solution, opts).to_json())
    else:
        bytecode.warm()                 # once per interpreter and versions: workers then start from bytecode
        watched = audit.watched_paths(problem)
        tree = audit.source_tree_digest(watched)
        _judge_all(problem, solution, opts, record, dtypes)
        changes = audit.tree_changes(tree, audit.source_tree_digest(watched))
        if changes:
            record.reasons.append(Reason("tampering", "wrote into the source tree: " + ", ".join(changes[:8]))
                                  .to_json())
    record.verdict = verdict_of([Reason(**r) for r in record.reasons])
    record.elapsed_s = round(time.monotonic() - t0, 2)
    Stages.finish(record)
    return record


def _select_dtypes(problem: Problem, solution: SolutionInfo, opts: Options, record: EvalRecord) -> list:
    wanted = list(opts.dtypes) if opts.dtypes else list(problem.dtypes)
    for name in wanted:
        problem.dtype(name)            # unknown dtype -> ProblemError naming the known ones
    chosen = []
    for name in wanted:
        if solution.dtypes is not None and name not in solution.dtypes:
            record.skipped[name] = f"not in the solution's DTYPES {solution.dtypes}"
        else:
            chosen.append(problem.dtypes[name])
    return chosen


def _nothing_judged(problem: Problem, solution: SolutionInfo, opts: Options) -> Reason:
    """A judgement that judged no dtype is never a pass: a file declaring DTYPES = () (or only dtypes the problem
    does not have), or asked for a --dtype outside its DTYPES, computed nothing the judge saw."""
    asked = list(opts.dtypes) if opts.dtypes else list(problem.dtypes)
    return Reason("nothing_judged", f"no dtype judged: asked for {', '.join(asked)}; the solution's DTYPES is "
                                    f"{tuple(solution.dtypes or ())}; problem {problem.id} has "
                                    f"{', '.join(problem.dtypes)}")


def _judge_all(problem, solution, opts, record, dtypes) -> None:
    timing = opts.device == "cuda" and opts.timing and not opts.case
    # The baseline worker starts first: it measures the idle GPU's flush time before any candidate code exists. The
    # candidate's worker is spawned beside it, gated: its harness start-up (imports: most of a worker's start) overlaps
    # the baseline's, and it touches the GPU and imports the candidate only once the baseline worker has said hello
    # (gauntlet.judge.process.isolate, deferred start). Where this card's idle flush time is known from an earlier
    # judgement (gauntlet.judge.timing.peaks.cached_quiet), the candidate is not held back: both workers are let go
    # together, their GPU start-up inside one shared turn (_start_judge), and the known idle time stands in for the one
    # the baseline worker measures then, beside the candidate (timed.ensure_baseline). Many judgements in one process
    # (eval-many, run): the baseline worker may be the last judgement's, and this candidate's worker may have been
    # started, gated, during it (gauntlet.judge.process.standby).
    stages = Stages(record)
    base = None
    if timing:
        base = standby.take_baseline(problem, opts) or \
            timed.start_baseline_worker(problem, opts.device, opts.sandbox, deferred=True)
    quiet = timed.known_quiet() if base is not None else None
    judge, first = None, None
    budget = TimeBudget(opts.time_limit_s)       # shared by every candidate worker of this judgement
    started: list = []                           # every candidate worker of this judgement (standby.keep_baseline)
    try:
        first = standby.take_candidate(problem, solution, opts, budget)
        if base is not None:
            first = first or Child(problem, solution.path, solution.backend, opts.device, sandbox=opts.sandbox,
                                   budget=budget, deferred=True, fmt=solution.format)
            if quiet is None:
                with turns.alone(opts.device):      # the idle reading: no other judge's work on the card either
                    timed.finish_baseline_start(base, problem)
                timed.learn_quiet(base)
        stages.lap("start")
        for i, spec in enumerate(dtypes):
            if judge is None or not judge.child.alive:
                # A crash or a sticky CUDA error costs one dtype, not all: the next one gets a fresh process.
                started.append(first)
                judge = _start_judge(problem, solution, opts, record, base, budget, first, started)
                first = None
                stages.lap("start")
                if judge is None:
                    why = "its import failed (import_error below)" if any(
                        r["code"] == "import_error" for r in record.reasons) else "its process did not start"
                    for rest in dtypes[i:]:
                        record.skipped[rest.name] = f"not judged: {why}"
                    break
            reasons = fuzz_dtype(judge, spec, opts, record)
            judge.release()                  # before timing: its inputs need the room (calls.Judge.release)
            stages.lap("correctness", spec.name)
            record.reasons += [r.to_json() for r in reasons]
            if any(r.code in ("crash", "timeout") for r in reasons):
                judge.child.close()
                stages.lap("close")
                continue
            if reasons:
                continue
            if timing:
                timed.ensure_baseline(base, problem, quiet)
                record.confinement = dict(record.confinement or {}, baseline=base.confinement)
                timed.time_dtype(judge, spec, opts, record)
                stages.lap("timing", spec.name)
    finally:
        stages.skip()
        kept = standby.keep_baseline(base, problem, opts, [c for c in started if c is not None])
        close_all([first, judge.child if judge is not None else None, None if kept else base])
        stages.lap("close")
    for name, summary in _scores(record).items():
        record.score[name] = summary


def _start_judge(problem, solution, opts, record, base, budget=None, child=None, started=None,
                 retry: bool = True) -> Judge | None:
    """`child`: a candidate worker already spawned (gated) beside the baseline worker; else a new one (added to
    `started`). `retry`: a start crowded out of the card's memory by other judges may be made once more."""
    try:
        if child is None:
            child = Child(problem, solution.path, solution.backend, opts.device, sandbox=opts.sandbox, budget=budget,
                          fmt=solution.format)
            if started is not None:
                started.append(child)
        with turns.sharing(opts.device):
            # Both workers' GPU start-up (the candidate's import may run GPU work; the baseline's CUDA context and
            # warm-up) inside one shared turn: side by side, never beside another judge's timing.
            waiting = base is not None and base.hello is None
            if waiting:
                base.release()
            child.finish_start()
            if waiting:
                try:
                    timed.finish_baseline_start(base, problem)
                except RuntimeError:
                    pass               # said where timing needs the baseline (timed.ensure_baseline), as before
    except ChildFailed as exc:
        if retry and child is not None and turns.crowded_out(exc.reason, opts.device):
            # Its CUDA start-up ran out of memory beside other judges: started again, once, a second later (a
            # worker beside it past its share of the card is stopped meanwhile: gauntlet.judge.process.watchdog).
            close_all([child])
            time.sleep(1.0)
            again = Child(problem, solution.path, solution.backend, opts.device, sandbox=opts.sandbox,
                          budget=budget, fmt=solution.format, deferred=True)
            if started is not None:
                started.append(again)
            return _start_judge(problem, solution, opts, record, base, budget, again, started, retry=False)
        reason = exc.reason
        if reason.code == "import_error":
            reason = Reason("import_error", import_detail(reason.detail, str(solution.path)), reason.repro)
        if reason.to_json() not in record.reasons:
            record.reasons.append(reason.to_json())
        return None
    record.confinement = {"candidate": child.confinement,
                          "baseline": getattr(base, "confinement", None)}   # a baseline still starting: set when it has
    declared = child.hello.get("kernels", [])
    return Judge(problem, child, opts.device, timeout=opts.case_timeout_s, base=base,
                 declared=frozenset(d for d in declared if isinstance(d, str)) if isinstance(declared, list)
                 else frozenset(), custom=solution.backend != "torch")


def import_detail(detail: str, path: str) -> str:
    """A failed import said as one: its first line names the file and the exception, and the traceback the worker
    sent starts at the candidate's own frames (the worker's and the loader's above them say nothing to the author)."""
    lines = detail.rstrip().splitlines()
    if not lines or not lines[0].startswith("Traceback"):
        return detail
    mine = next((i for i, line in enumerate(lines) if line.strip().startswith(f'File "{path}"')), 1)
    return f"the import of {path} failed: {lines[-1]}\n" + "\n".join(lines[mine:])


def _scores(record: EvalRecord) -> dict:
    if verdict_of([Reason(**r) for r in record.reasons]) != "pass":
        return {}
    by_dtype: dict = {}
    for t in record.timings:
        by_dtype.setdefault(t["dtype"], []).append(t)
    return {name: scoring.summarize(ts) for name, ts in by_dtype.items()}
