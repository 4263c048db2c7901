"""Judge one candidate on one problem: fuzz for correctness per dtype, then (on cuda) time against the baselines.

This module is the trusted side. It regenerates every input itself from the seed it sent, computes the oracle and
torch's own answer, and compares what came back from the child. Everything the child says is data.
"""
from __future__ import annotations

import collections
import random
import time
from dataclasses import dataclass, field

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed

from harness import backends, formats, protocol
from harness.judge import (audit, bytecode, check, conventions, environment, failures, fingerprint, fuzz, kernels,
                           memory, replies, scoring, standby, timed, turns)
from harness.judge.watchdog import TimeBudget
from harness.protocol import digest
from harness.discover import SolutionInfo
from harness.judge.isolate import Child, ChildFailed, close_all
from harness.inputs import make_inputs
from harness.judge.oracle import expected_for
from harness.problem import DtypeSpec, Problem
from harness.reasons import Reason, verdict_of
from harness.judge.results import EvalRecord, stage_totals



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


class CaseFailed(AssertionError):
    """A call's output was judged wrong: Hypothesis shrinks towards a smaller failing case."""

    def __init__(self, reasons: list[Reason]):
        super().__init__("; ".join(f"{r.code}: {r.detail}" for r in reasons))
        self.reasons = reasons


class Abort(BaseException):  # noqa: N818 - BaseException on purpose: Hypothesis must not shrink through a dead child
    def __init__(self, reason: Reason):
        super().__init__(reason.detail)
        self.reason = reason


def out_of_memory(reason: Reason) -> bool:
    """A crash that ran out of GPU memory: the judge's own (its message below) or the worker's (torch's error in
    its traceback). The worker's text is the candidate's to write, so this only ever earns a second try alone."""
    return reason.code == "crash" and any(s in reason.detail for s in (
        "OutOfMemoryError", "CUDA out of memory", "the judge ran out of GPU memory"))


@dataclass
class Judge:
    """Per-candidate state on the trusted side: the child and recent expectations, to recognise stale answers."""
    problem: Problem
    child: Child
    device: str
    timeout: float = 180.0
    # (case key, expectation) of the current case's earlier calls, to recognise an answer that belongs to one of
    # them. Only the current case's: an expectation holds two float64 outputs, and those of earlier cases (other
    # keys, never compared) would only fill the GPU (harness.judge.memory budgets calls_per_case of them).
    history: collections.deque = field(init=False)     # sized from the problem in __post_init__
    calls: int = 0
    kernels: dict = field(default_factory=dict)
    # Where a dtype's correctness time went, in seconds (the record's cases[dtype]["phases_s"]): the judge's inputs
    # and oracle, the request (the worker's inputs, the call and its checks, the output's way back), the judge's
    # checks of the reply (digests, the comparison); and the GiB of outputs that came back. Measured by the judge,
    # so a profile of the suite needs no other run.
    phases: dict = field(default_factory=dict)

    base: Child | None = None            # the clean baseline worker (cuda timing only)
    declared: frozenset = frozenset()    # the candidate's Triton kernel names, reported by its worker at start-up
    custom: bool = True                  # a non-torch backend: its work must be its own
    host_bound: bool = False             # a side starved with the host quiet: time on a quiet host (judge.timed)

    def __post_init__(self):
        # The case's earlier calls, and no more: a new case may draw the same shape, and its expectations must not
        # pile up past the calls_per_case that harness.judge.memory budgets.
        self.history = collections.deque(maxlen=max(1, self.problem.calls_per_case - 1))

    def run_call(self, shape: dict, spec: DtypeSpec, seed: int) -> list[Reason]:
        """A correctness call shares the card with other judges' (harness.judge.turns), never with a timed shape.
        Each judge sizes its cases to its share of the card's memory (harness.judge.memory), but the shares are
        estimates read at different moments: a call that runs out of GPU memory (in the judge or in the worker)
        while other judges are on the card may have been pushed out by them, and a verdict caused by another judge
        must not stand. So it is made again once with the card to this judge alone (no other judge's call running
        beside it); running out again is the candidate's crash, as it is for a judge alone on the card."""
        try:
            with turns.sharing(self.device):
                return self._run_call(shape, spec, seed)
        except Abort as exc:
            if not (self.device == "cuda" and out_of_memory(exc.reason) and turns.others(self.device) > 0):
                raise
        self.history.clear()
        torch.cuda.empty_cache()
        with turns.alone(self.device):
            return self._run_call(shape, spec, seed)

    def _run_call(self, shape: dict, spec: DtypeSpec, seed: int) -> list[Reason]:
        key = (spec.name, tuple(sorted(shape.items())))
        if any(k != key for k, _ in self.history):
            self.history.clear()           # a new case: free the last one's expectations before building any
            if self.device == "cuda":
                # and hand the cached blocks back: sizes change from case to case, so the caching allocator's
                # reserve would otherwise grow past this judge's share (harness.judge.memory), and the candidate's
                # worker on the same GPU would run out of memory building its inputs (seen on an H100, 4 judges).
                torch.cuda.empty_cache()
        phases = self.phases.setdefault(spec.name, {"expect": 0.0, "request": 0.0, "check": 0.0, "output_gib": 0.0})
        t0 = time.monotonic()
        try:
            # The judge's side first: the expected output's size caps what the reply may carry.
            inputs = make_inputs(self.problem, shape, spec, seed, self.device)
            expected = expected_for(self.problem, inputs, spec)
        except torch.OutOfMemoryError:
            raise Abort(Reason("crash", "the judge ran out of GPU memory while the candidate's process held it "
                                        f"(on {shape})")) from None
        finally:
            t1 = time.monotonic()
            phases["expect"] += t1 - t0
        try:
            self.calls += 1
            header, blobs = self.child.request({"op": "case", "shape": shape, "dtype": spec.name, "seed": seed},
                                               timeout=self.timeout, what=f"running solve on {shape}",
                                               max_blob=replies.blob_cap(expected.oracle.numel()))
        except ChildFailed as exc:
            raise Abort(exc.reason) from None
        finally:
            t2 = time.monotonic()
            phases["request"] += t2 - t1
        try:
            phases["output_gib"] += sum(len(b) for b in blobs) / 2**30
            return self._judge_reply(header, blobs, inputs, expected, shape, spec, key)
        finally:
            phases["check"] += time.monotonic() - t2

    def _judge_reply(self, header, blobs, inputs, expected, shape, spec, key) -> list[Reason]:
        if not header.get("ok"):
            raise Abort(Reason("crash", str(header.get("detail", ""))))     # a worker only ever reports a crash
        try:
            replies.case(header, len(blobs), len(inputs))
        except replies.BadReply as exc:
            raise Abort(Reason("tampering", f"malformed reply from the candidate's process: {exc}")) from None
        # What ran, over every case of the dtype (for the record: it shows which of a kernel's paths, TMA or its
        # pointer fallback, split-K or not, the fuzzing reached; the first case alone is an odd-sized edge).
        seen = self.kernels.setdefault(spec.name, [])
        seen += [k for k in kernels.summary(header["calls"]) if k not in seen][:max(0, 20 - len(seen))]
        reasons = self._guard_reasons(header, inputs, expected, shape)
        reasons += check.structural_reasons(header["meta"], expected, self.device, self.problem.output_layout)
        if not reasons:
            out = protocol.tensor_from_wire(header["wire"], blobs[0]).to(self.device)
            value = conventions.value_reasons(out, expected, spec)     # any admitted quantization convention
            if value and self._is_stale(out, key, spec):
                value = [Reason("stale_output", "the output matches the answer to an earlier call with other "
                                                "inputs, not this call's")]
            reasons += value
        reasons += check.retained_reasons(header["meta"])
        self.history.append((key, expected))
        return reasons

    def _is_stale(self, out: torch.Tensor, key, spec: DtypeSpec) -> bool:
        """A wrong output that passes against an earlier call's expectations of the same case shape. Exact
        (integer) outputs of a few elements can equal an earlier answer by chance, so those need 16 or more."""
        if spec.exact and out.numel() < 16:
            return False
        return any(k == key and conventions.matches(out, old, spec) for k, old in self.history)

    def _guard_reasons(self, header: dict, inputs: tuple, expected, shape: dict) -> list[Reason]:
        reasons = []
        changed = header.get("tampering", []) + header.get("state", [])
        if changed:
            reasons.append(Reason("tampering", "changed during solve: " + ", ".join(changed[:10])))
        if self.custom:
            # An empty product (K=0, say) has nothing to compute: a fill is a right answer, not a borrowed one.
            need_own = expected.oracle.numel() > 0 and self.problem.flops(shape) > 0 and (
                self.device == "cuda" or self.child.backend == "triton")
            found = kernels.call_problems(header["calls"][0], self.device, self.declared, timed=False,
                                          need_own=need_own)
            if found:
                reasons.append(Reason("forbidden_op", "; ".join(found)))
        if header.get("background"):
            reasons.append(Reason("background_work", header["background"]))
        escaped = self.child.escaped()
        if escaped:
            reasons.append(Reason("background_work", f"process(es) {escaped[:5]} escaped the candidate's process "
                                                     "group and are still running"))
        if header.get("bands_changed"):
            reasons.append(Reason("out_of_bounds_write", f"input(s) {header['bands_changed']}: the call wrote into "
                                                         "the memory just before or after them"))
        mutated = [i for i, (x, d) in enumerate(zip(inputs, header.get("input_digests", []))) if digest(x) != d]
        if mutated or len(header.get("input_digests", [])) != len(inputs):
            reasons.append(Reason("input_mutated", f"input(s) {mutated} differ from their pristine copies after "
                                                   "the call"))
        return reasons


class Stages:
    """Where a judgement's wall time goes (the record's `stages_s`), measured as it runs: `start` (the workers'
    start-ups, restarts included, and the turns waited for them), `correctness` and `timing` per dtype (timing
    includes the baseline's readiness and any ceiling measured), `close` (the workers' ends), and `rest` (the
    judge's preparation: fingerprints, the environment's and source tree's digests). Issue 17's profile of a suite
    is then read from its results file, on any machine, with no second run."""

    def __init__(self, record: EvalRecord):
        self.out = record.stages_s
        self.mark = time.monotonic()

    def lap(self, key: str, dtype: str | None = None) -> None:
        """Add the time since the last lap to `key` (per dtype where given), and start the next lap."""
        now = time.monotonic()
        spent = now - self.mark
        if dtype is None:
            self.out[key] = round(self.out.get(key, 0.0) + spent, 3)
        else:
            per = self.out.setdefault(key, {})
            per[dtype] = round(per.get(dtype, 0.0) + spent, 3)
        self.mark = now

    def skip(self) -> None:
        self.mark = time.monotonic()

    @staticmethod
    def finish(record: EvalRecord) -> None:
        counted = sum(stage_totals([{"stages_s": record.stages_s}]).values())
        record.stages_s["rest"] = round(max(0.0, record.elapsed_s - counted), 3)


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
    # The baseline worker starts first: it measures the idle GPU's flush time before any candidate code exists.
    # The candidate's worker is spawned beside it, gated: its harness start-up (imports: most of a worker's
    # start) overlaps the baseline's, and it touches the GPU and imports the candidate only once the baseline
    # worker has said hello (harness.judge.isolate, deferred start).
    # Where this card's idle flush time is known from an earlier judgement (harness.judge.peaks.cached_quiet), the
    # candidate is not held back: both workers are let go together, their GPU start-up inside one shared turn
    # (_start_judge), and the known idle time stands in for the one the baseline worker measures then, beside the
    # candidate (timed.ensure_baseline).
    # Many judgements in one process (eval-many, run): the baseline worker may be the last judgement's, and this
    # candidate's worker may have been started, gated, during it (harness.judge.standby).
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
                    for rest in dtypes[i:]:
                        record.skipped[rest.name] = "not judged: the candidate's process did not start"
                    break
            reasons = _fuzz_dtype(judge, spec, opts, record)
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


def _start_judge(problem, solution, opts, record, base, budget=None, child=None, started=None) -> Judge | None:
    """`child`: a candidate worker already spawned (gated) beside the baseline worker; else a new one (added to
    `started`)."""
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
        if exc.reason.to_json() not in record.reasons:
            record.reasons.append(exc.reason.to_json())
        return None
    record.confinement = {"candidate": child.confinement,
                          "baseline": getattr(base, "confinement", None)}   # a baseline still starting: set when it has
    declared = child.hello.get("kernels", [])
    return Judge(problem, child, opts.device, timeout=opts.case_timeout_s, base=base,
                 declared=frozenset(d for d in declared if isinstance(d, str)) if isinstance(declared, list)
                 else frozenset(), custom=solution.backend != "torch")


def _fuzz_dtype(judge: Judge, spec: DtypeSpec, opts: Options, record: EvalRecord) -> list[Reason]:
    problem, calls = judge.problem, judge.problem.calls_per_case
    counts = record.cases.setdefault(spec.name, {"examples": 0, "calls": 0, "status": "pass"})
    failure: dict = {}
    current: dict = {}

    itemsize = spec.torch_dtype().itemsize
    if judge.device == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def run_case(shape, case_seed):
        counts["examples"] += 1
        try:
            _run_case(shape, case_seed)
        finally:
            spent = judge.phases.get(spec.name)
            if spent:
                counts["phases_s"] = {k: round(v, 6 if k == "output_gib" else 3) for k, v in spent.items()}

    def _run_case(shape, case_seed):
        current.update(shape=shape, seed=case_seed)
        # The memory model's figure for the largest case, beside what the judge really used (below): a check
        # of harness.judge.memory on every run.
        est = memory.case_bytes(problem, shape, itemsize, calls) / 2**30
        counts["largest_case_gib"] = round(max(counts.get("largest_case_gib", 0.0), est), 2)
        try:
            _run_calls(shape, case_seed)
        finally:
            if judge.device == "cuda":
                counts["judge_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)

    def _run_calls(shape, case_seed):
        for s in fuzz.call_seeds(case_seed, calls):
            counts["calls"] += 1
            reasons = judge.run_call(shape, spec, s)
            if spec.name in judge.kernels:
                counts["kernels"] = judge.kernels[spec.name]
            if reasons:
                failure.update(shape=shape, seed=case_seed, reasons=reasons)
                raise CaseFailed(reasons)

    try:
        if opts.case:
            shape, case_seed = fuzz.parse_case(opts.case, problem.dims)
            run_case(shape, case_seed)
        else:
            for shape, case_seed in failures.load(problem.id, record.path, spec.name, opts.device):
                if fuzz.outside_domain(shape, problem, opts.device):
                    continue                          # the problem changed since: not a case of it any more
                counts["replayed"] = counts.get("replayed", 0) + 1
                run_case(shape, case_seed)          # a case that failed before is tried first
            bounds = problem.fuzz.get(opts.device) or problem.fuzz["cpu"]
            fits = _fits(problem, spec, opts)
            edges = fuzz.edge_cases(bounds, getattr(problem.module(), "valid_shape", None), fits)
            for i, shape in enumerate(edges[:opts.max_edges]):
                counts["edges"] = counts.get("edges", 0) + 1
                run_case(shape, (record.seed + 7919 * (i + 1)) % 2**31)     # then the domain's ends
            _hypothesis_loop(problem, spec, opts, record, run_case, fits)()
    except Abort as exc:
        counts["status"] = exc.reason.code
        shape, seed = current.get("shape"), current.get("seed")
        exc.reason.repro = exc.reason.repro or (fuzz.repro(record, spec, shape, seed) if shape else "")
        return [exc.reason]
    except Exception as exc:  # noqa: BLE001 - CaseFailed, or Hypothesis' FlakyFailure when a failure did not replay
        if not failure:
            raise
        counts["status"] = "fail"
        reasons = failure["reasons"]       # the last failure Hypothesis saw is the shrunk one it re-raised
        if not isinstance(exc, CaseFailed):
            reasons = [Reason(r.code, r.detail + " (did not fail again on replay: the candidate is not "
                                                 "deterministic)") for r in reasons]
        repro = fuzz.repro(record, spec, failure["shape"], failure["seed"])
        if isinstance(exc, CaseFailed) and not opts.case:
            failures.save(problem.id, record.path, spec.name, opts.device, failure["shape"], failure["seed"])
        return [Reason(r.code, f"[{spec.name} {fuzz.format_case(failure['shape'], failure['seed'])}] {r.detail}",
                       repro) for r in _dedupe(reasons)]
    return []


def _fits(problem, spec: DtypeSpec, opts):
    """The device's memory as a bound on the cases (harness.judge.memory): read when the dtype's judgement starts."""
    return memory.fits_predicate(problem, spec.torch_dtype().itemsize, memory.device_budget(opts.device))


def _hypothesis_loop(problem, spec, opts, record, run_case, fits=None):
    valid = getattr(problem.module(), "valid_shape", None)
    bounds = problem.fuzz.get(opts.device) or problem.fuzz["cpu"]
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if opts.shrink else [])

    @settings(max_examples=opts.examples, deadline=None, database=None,
              phases=phases, derandomize=False, print_blob=False, verbosity=Verbosity.quiet,
              report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
    @given(shape=fuzz.shapes(bounds, valid, fits), case_seed=fuzz.seeds())
    def fuzz_cases(shape, case_seed):
        run_case(shape, case_seed)

    fuzz_cases.hypothesis.inner_test._hypothesis_internal_add_digest = (
        f"{problem.id}|{record.path}|{spec.name}|{opts.device}".encode())
    return hypothesis_seed(record.seed)(fuzz_cases)


def _dedupe(reasons: list[Reason]) -> list[Reason]:
    seen, out = set(), []
    for r in reasons:
        if r.code not in seen:
            seen.add(r.code)
            out.append(r)
    return out


def _scores(record: EvalRecord) -> dict:
    if verdict_of([Reason(**r) for r in record.reasons]) != "pass":
        return {}
    by_dtype: dict = {}
    for t in record.timings:
        by_dtype.setdefault(t["dtype"], []).append(t)
    return {name: scoring.summarize(ts) for name, ts in by_dtype.items()}
