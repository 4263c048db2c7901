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
from hypothesis.database import DirectoryBasedExampleDatabase

from harness import audit, backends, check, fuzz, protocol, scoring
from harness.guard import digest
from harness.discover import ROOT, SolutionInfo, UsageError, solutions_dir
from harness.isolate import Child, ChildFailed
from harness.oracle import expected_for, make_inputs
from harness.problem import DtypeSpec, Problem
from harness.reasons import Reason, verdict_of
from harness.results import EvalRecord

DB_DIR = ROOT / ".gauntlet" / "hypothesis"


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


@dataclass
class Judge:
    """Per-candidate state on the trusted side: the child and recent expectations, to recognise stale answers."""
    problem: Problem
    child: Child
    device: str
    timeout: float = 180.0
    # Recent (case key, expectation) pairs, to recognise an answer that belongs to an earlier call. Bounded: on
    # the GPU each expectation holds three float64 outputs.
    history: collections.deque = field(default_factory=lambda: collections.deque(maxlen=4))
    calls: int = 0
    kernels: dict = field(default_factory=dict)

    def run_call(self, shape: dict, spec: DtypeSpec, seed: int) -> list[Reason]:
        try:
            profile = self.calls % 10 == 0            # the first call, then every tenth: kernels under the profiler
            self.calls += 1
            header, blobs = self.child.request({"op": "case", "shape": shape, "dtype": spec.name, "seed": seed,
                                                "profile": profile},
                                               timeout=self.timeout, what=f"running solve on {shape}")
        except ChildFailed as exc:
            raise Abort(exc.reason) from None
        if not header.get("ok"):
            raise Abort(Reason(header.get("code", "crash"), str(header.get("detail", ""))))
        if header.get("kernels") is not None:
            self.kernels.setdefault(spec.name, header["kernels"][:20])     # what ran, for the record
        try:
            inputs = make_inputs(self.problem, shape, spec, seed, self.device)
            expected = expected_for(self.problem, inputs, spec)
        except torch.OutOfMemoryError:
            # The judge's own allocations failed while the candidate's process holds the GPU's memory.
            raise Abort(Reason("crash", "the judge ran out of GPU memory while the candidate's process held it "
                                        f"(on {shape})")) from None
        key = (spec.name, tuple(sorted(shape.items())))
        reasons = self._guard_reasons(header, inputs)
        reasons += check.structural_reasons(header["meta"], expected, self.device)
        if not reasons:
            out = protocol.tensor_from_wire(header["wire"], blobs[0]).to(self.device)
            value = check.value_reasons(out, expected, spec)
            if value and self._is_stale(out, key, spec):
                value = [Reason("stale_output", "the output matches the answer to an earlier call with other "
                                                "inputs, not this call's")]
            reasons += value
        self.history.append((key, expected))
        return reasons

    def _is_stale(self, out: torch.Tensor, key, spec: DtypeSpec) -> bool:
        """A wrong output that passes against an earlier call's expectations of the same case shape. Exact
        (integer) outputs of a few elements can equal an earlier answer by chance, so those need 16 or more."""
        if spec.exact and out.numel() < 16:
            return False
        return any(k == key and check.matches(out, old, spec) for k, old in self.history)

    def _guard_reasons(self, header: dict, inputs: tuple) -> list[Reason]:
        reasons = []
        if header.get("tampering"):
            reasons.append(Reason("tampering", "changed during solve: " + ", ".join(header["tampering"][:10])))
        if header.get("forbidden_ops"):
            reasons.append(Reason("forbidden_op", "library ops called: aten." + ", aten.".join(header["forbidden_ops"])))
        if header.get("kernel_problem"):
            reasons.append(Reason("forbidden_op", header["kernel_problem"]))
        if header.get("background"):
            reasons.append(Reason("background_work", header["background"]))
        escaped = self.child.escaped()
        if escaped:
            reasons.append(Reason("background_work", f"process(es) {escaped[:5]} escaped the candidate's process "
                                                     "group and are still running"))
        mutated = [i for i, (x, d) in enumerate(zip(inputs, header.get("input_digests", []))) if digest(x) != d]
        if mutated or len(header.get("input_digests", [])) != len(inputs):
            reasons.append(Reason("input_mutated", f"input(s) {mutated} differ from their pristine copies after "
                                                   "the call"))
        return reasons


def evaluate(problem: Problem, solution: SolutionInfo, opts: Options) -> EvalRecord:
    t0 = time.monotonic()
    record = EvalRecord(problem=problem.id, solution=solution.name, path=str(solution.path),
                        backend=solution.backend, device=opts.device)
    record.seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2**31)
    dtypes = _select_dtypes(problem, solution, opts, record)
    problem.module()                    # imported by the judge before any candidate code runs
    record.static_notes = audit.static_notes(solution.path)
    ok, why = backends.status(solution.backend, opts.device)
    if not ok:
        code = "unsupported" if solution.backend in backends.BACKENDS else "import_error"
        record.reasons.append(Reason(code, why).to_json())
    elif dtypes:
        watched = audit.watched_paths(problem.id, list(problem.baselines.values()))
        tree = audit.source_tree_digest(watched)
        _judge_all(problem, solution, opts, record, dtypes)
        changes = audit.tree_changes(tree, audit.source_tree_digest(watched))
        if changes:
            record.reasons.append(Reason("tampering", "wrote into the source tree: " + ", ".join(changes[:8]))
                                  .to_json())
    record.verdict = verdict_of([Reason(**r) for r in record.reasons])
    record.elapsed_s = round(time.monotonic() - t0, 2)
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


def _judge_all(problem, solution, opts, record, dtypes) -> None:
    try:
        child = Child(problem.id, solution.path, solution.backend, opts.device)
    except ChildFailed as exc:
        record.reasons.append(exc.reason.to_json())
        return
    judge = Judge(problem, child, opts.device, timeout=opts.case_timeout_s)
    try:
        for i, spec in enumerate(dtypes):
            reasons = _fuzz_dtype(judge, spec, opts, record)
            record.reasons += [r.to_json() for r in reasons]
            if any(r.code in ("crash", "timeout") for r in reasons):
                # A crashed process may hold a sticky CUDA error: judging more dtypes in it would only repeat it.
                for rest in dtypes[i + 1:]:
                    record.skipped[rest.name] = f"not judged: the candidate's process failed ({reasons[0].code})"
                break
            if reasons:
                continue
            if opts.device == "cuda" and opts.timing and not opts.case:
                _time_dtype(judge, solution, spec, opts, record)
    finally:
        child.close()
    for name, summary in _scores(record).items():
        record.score[name] = summary


def _fuzz_dtype(judge: Judge, spec: DtypeSpec, opts: Options, record: EvalRecord) -> list[Reason]:
    problem, calls = judge.problem, judge.problem.calls_per_case
    counts = record.cases.setdefault(spec.name, {"examples": 0, "calls": 0, "status": "pass"})
    failure: dict = {}
    current: dict = {}

    def run_case(shape, case_seed):
        counts["examples"] += 1
        current.update(shape=shape, seed=case_seed)
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
            _hypothesis_loop(problem, spec, opts, record, run_case)()
    except Abort as exc:
        counts["status"] = exc.reason.code
        shape, seed = current.get("shape"), current.get("seed")
        exc.reason.repro = exc.reason.repro or (_repro(record, spec, shape, seed) if shape else "")
        return [exc.reason]
    except Exception as exc:  # noqa: BLE001 - CaseFailed, or Hypothesis' FlakyFailure when a failure did not replay
        if not failure:
            raise
        counts["status"] = "fail"
        reasons = failure["reasons"]       # the last failure Hypothesis saw is the shrunk one it re-raised
        if not isinstance(exc, CaseFailed):
            reasons = [Reason(r.code, r.detail + " (did not fail again on replay: the candidate is not "
                                                 "deterministic)") for r in reasons]
        repro = _repro(record, spec, failure["shape"], failure["seed"])
        return [Reason(r.code, f"[{spec.name} {fuzz.format_case(failure['shape'], failure['seed'])}] {r.detail}",
                       repro) for r in _dedupe(reasons)]
    return []


def _hypothesis_loop(problem, spec, opts, record, run_case):
    valid = getattr(problem.module(), "valid_shape", None)
    bounds = problem.fuzz.get(opts.device) or problem.fuzz["cpu"]
    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if opts.shrink else [])

    @settings(max_examples=opts.examples, deadline=None, database=DirectoryBasedExampleDatabase(str(DB_DIR)),
              phases=phases, derandomize=False, print_blob=False, verbosity=Verbosity.quiet,
              report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
    @given(shape=fuzz.shapes(bounds, valid), case_seed=fuzz.seeds())
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


def _repro(record: EvalRecord, spec: DtypeSpec, shape, seed) -> str:
    return (f"gauntlet eval {record.problem} {record.path} --device {record.device} --dtype {spec.name} "
            f"--case '{fuzz.format_case(shape, seed)}'")


# --- timing ----------------------------------------------------------------------------------------------------

def _baseline_paths(problem: Problem) -> dict:
    paths = {}
    for label, name in problem.baselines.items():
        path = solutions_dir() / problem.id / f"{name}.py"
        if not path.is_file():
            raise UsageError(f"problem {problem.id}: baseline {label!r} names solution {name!r}, "
                             f"but {path} does not exist")
        paths[label] = str(path)
    return paths


def _time_dtype(judge: Judge, solution, spec: DtypeSpec, opts: Options, record: EvalRecord) -> None:
    problem = judge.problem
    for bench in (opts.shapes or problem.benchmark)[:opts.max_shapes]:
        shape = {d: bench[d] for d in problem.dims}
        request = {"op": "time", "shape": shape, "dtype": spec.name, "baselines": _baseline_paths(problem),
                   "budget_s": opts.timing_budget_s}
        try:
            header, blobs = judge.child.request(request, timeout=opts.case_timeout_s + 4 * opts.timing_budget_s,
                                                what=f"timing {shape}")
        except ChildFailed as exc:
            record.reasons.append(exc.reason.to_json())
            return
        if not header.get("ok"):
            record.reasons.append(Reason(header.get("code", "crash"), f"while timing {shape}: {header.get('detail')}")
                                  .to_json())
            return
        entry = _timing_entry(problem, spec, bench, shape, header, record, opts.peaks)
        reasons = _spot_checks(judge, spec, shape, header, blobs, record) + _physics(entry, header, opts.peaks)
        if header.get("tampering"):
            reasons.append(Reason("tampering", "changed during timing: " + ", ".join(header["tampering"][:10])))
        entry["spot_check"] = "fail" if reasons else "pass"
        record.timings.append(entry)
        record.reasons += [r.to_json() for r in reasons]
        if reasons:
            return


def _timing_entry(problem, spec, bench, shape, header, record, peaks) -> dict:
    sides = header["sides"]
    cand = sides["candidate"]
    cand_ms = scoring.median(cand["ms"])
    itemsize = spec.torch_dtype().itemsize
    flops, nbytes = problem.flops(shape), problem.bytes(shape, itemsize, itemsize)
    entry = {"dtype": spec.name, "shape": shape, "source": bench.get("source", ""), "candidate_ms": cand_ms,
             "candidate_wall_ms": scoring.median(cand["wall_ms"]), "mode": cand["mode"], "reps": len(cand["ms"]),
             "tflops": flops / cand_ms / 1e9, "gbps": nbytes / cand_ms / 1e6, "baselines": {}}
    peak = (peaks.get(spec.name) or {}).get("tflops")
    entry["peak_fraction"] = entry["tflops"] / peak if peak else None
    entry["bw_fraction"] = entry["gbps"] / peaks["copy_gbps"] if peaks.get("copy_gbps") else None
    for label, side in sides.items():
        if label == "candidate":
            continue
        if "error" in side:
            entry.setdefault("baseline_errors", {})[label] = side["error"]
            continue
        base_ms = scoring.median(side["ms"])
        entry["baselines"][label] = {"ms": base_ms, "speedup": base_ms / cand_ms, "mode": side["mode"],
                                     "ci95": list(scoring.speedup_ci(side["ms"], cand["ms"], seed=record.seed or 0)),
                                     "tflops": flops / base_ms / 1e9, "note": side.get("note", ""),
                                     "wall_ms": scoring.median(side["wall_ms"])}
    return entry


def _spot_checks(judge, spec, shape, header, blobs, record) -> list[Reason]:
    """Outputs of randomly chosen timed calls are judged like any other: fast-and-wrong only when timed fails."""
    reasons, blobs = [], list(blobs)
    for spot in header.get("spots") or [{"is_tensor": False, "type": "nothing"}]:
        inputs = make_inputs(judge.problem, shape, spec, spot["seed"], judge.device) if spot.get("seed") is not None \
            else None
        if inputs is None:
            reasons.append(Reason("crash", f"timed call on {shape} came back without its input seed"))
            break
        expected = expected_for(judge.problem, inputs, spec)
        found = check.structural_reasons(spot, expected, judge.device)
        if not found:
            out = protocol.tensor_from_wire(spot["wire"], blobs.pop(0)).to(judge.device)
            found = check.value_reasons(out, expected, spec)
        elif spot.get("is_tensor"):
            blobs.pop(0)
        for r in found:
            r.detail = f"[timed call, {spec.name} {shape}] {r.detail}"
            r.repro = _repro(record, spec, shape, spot["seed"])
        reasons += found
        del inputs, expected
        if found:
            break
    if judge.device == "cuda":
        torch.cuda.empty_cache()
    return reasons


# A custom kernel can beat cuBLAS, but not the hardware: allow this much above the ceilings measured in the run
# (H100/H200 dense bf16 datasheet ~990 TFLOP/s vs ~780 measured: 1.27x; copy reaches ~90% of HBM bandwidth).
ROOFLINE_MARGIN = {"tflops": 1.5, "gbps": 1.3}


def _physics(entry: dict, header: dict, peaks: dict) -> list[Reason]:
    reasons = []
    peak = (peaks.get(entry["dtype"]) or {}).get("tflops")
    if peak and entry["tflops"] > ROOFLINE_MARGIN["tflops"] * peak:
        reasons.append(Reason("below_roofline", f"{entry['tflops']:.0f} TFLOP/s on {entry['shape']} is over "
                                                f"{ROOFLINE_MARGIN['tflops']}x the {peak:.0f} measured on this GPU"))
    bw = peaks.get("copy_gbps")
    if bw and entry["gbps"] > ROOFLINE_MARGIN["gbps"] * bw:
        reasons.append(Reason("below_roofline", f"{entry['gbps']:.0f} GB/s on {entry['shape']} is over "
                                                f"{ROOFLINE_MARGIN['gbps']}x the {bw:.0f} GB/s device copy"))
    # Work left running after the timed region closes shows as host wall time the events did not see.
    cand = header["sides"]["candidate"]
    gaps = {label: scoring.median([w - m for w, m in zip(side["wall_ms"], side["ms"])])
            for label, side in header["sides"].items() if "ms" in side}
    base_gap = min((g for label, g in gaps.items() if label != "candidate"), default=0.0)
    if gaps["candidate"] > base_gap + max(0.1, 0.25 * scoring.median(cand["ms"])):
        reasons.append(Reason("background_work", f"timed calls on {entry['shape']} kept the GPU busy "
                                                 f"{gaps['candidate']:.3f} ms past their end event (baseline "
                                                 f"{base_gap:.3f} ms): work left on another stream?"))
    return reasons


def _scores(record: EvalRecord) -> dict:
    if verdict_of([Reason(**r) for r in record.reasons]) != "pass":
        return {}
    by_dtype: dict = {}
    for t in record.timings:
        by_dtype.setdefault(t["dtype"], []).append(t)
    return {name: scoring.summarize(ts) for name, ts in by_dtype.items()}
