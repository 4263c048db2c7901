"""One dtype's correctness: the failing cases kept from earlier runs first, then the domain's edge cases, then
Hypothesis' cases (shrunk on a failure), each case a few calls judged by gauntlet.judge.calls. `opts` is the
judgement's gauntlet.judge.evaluate.Options.
"""
from __future__ import annotations


import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed

from .calls import Abort, CaseFailed, Judge
from .records.results import EvalRecord
from .values import failures, fuzz, memory
from ..inputs import magnitude_mode
from ..problem import DtypeSpec
from ..reasons import Reason


def fuzz_dtype(judge: Judge, spec: DtypeSpec, opts, record: EvalRecord) -> list[Reason]:
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
        # of gauntlet.judge.values.memory on every run.
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
            for shape, case_seed in failures.load(problem.id, record.path, spec.name, opts.device, opts.failures_dir):
                if fuzz.outside_domain(shape, problem, opts.device):
                    continue                          # the problem changed since: not a case of it any more
                counts["replayed"] = counts.get("replayed", 0) + 1
                run_case(shape, case_seed)          # a case that failed before is tried first
            net_shape = problem.net_case.get(opts.device)
            if net_shape is not None and spec.torch == "float32" and not spec.tf32:
                counts["net"] = 1                   # gauntlet.judge.values.net: every float32 judgement, first
                run_case(dict(net_shape), _random_seed(problem, spec, record.seed, calls))
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
            failures.save(problem.id, record.path, spec.name, opts.device, failure["shape"], failure["seed"],
                          opts.failures_dir)
        return [Reason(r.code, f"[{spec.name} {fuzz.format_case(failure['shape'], failure['seed'])}] {r.detail}",
                       repro) for r in _dedupe(reasons)]
    return []


def _random_seed(problem, spec: DtypeSpec, seed: int, calls: int) -> int:
    """The first case seed from `seed` on whose every call draws random inputs (no exact-arithmetic call): the net
    case is judged on error statistics, which an exact case does not have."""
    for i in range(1000):
        case_seed = (seed + 104_729 * i) % 2**31
        if all(magnitude_mode(problem, spec, s) != "exact" for s in fuzz.call_seeds(case_seed, calls)):
            return case_seed
    return seed


def _fits(problem, spec: DtypeSpec, opts):
    """The device's memory as a bound on the cases (gauntlet.judge.values.memory), read when the dtype's judgement
    starts."""
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
