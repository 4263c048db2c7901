"""Timing one dtype of a candidate that passed: for each benchmark shape, the schedule (gauntlet.judge.timing.bench),
the spot checks of timed calls, the physics floor and the second clock, then one timing entry for the record.
"""
from __future__ import annotations

import time

import torch

from ...inputs import make_inputs
from ..process import replies
from ..process.isolate import Child, ChildFailed
from . import peaks, scoring, spots, turns
from .bench import PRECISION, BaselineFailed, Schedule, TimingRejected
from .figures import Phases
from ..values.oracle import expected_for
from ..values.taken import TimedOutputs
from ...reasons import Reason


def start_baseline_worker(problem, device: str, sandbox: str | None = None, deferred: bool = False) -> Child:
    """The clean worker: the problem's baselines and nothing of any candidate, confined like the candidate's (so
    the candidate's worker, in a Landlock domain of its own, can neither signal nor trace it). (That each baseline
    exists was checked when the problem was loaded: gauntlet.discover.) `deferred`: return once it is spawned;
    `finish_baseline_start` waits for it (its start then overlaps the candidate worker's own)."""
    try:
        base = Child(problem, None, "torch", device, role="baseline", sandbox=sandbox, deferred=True)
    except ChildFailed as exc:
        raise RuntimeError(f"problem {problem.id}: the baseline worker failed to start: {exc.reason.detail}") from None
    if not deferred:
        finish_baseline_start(base, problem)
    return base


def finish_baseline_start(base: Child, problem) -> None:
    """Wait for the baseline worker's hello (its quiet-GPU flush time is measured before it says it). A failed start
    fails again on every later call (Child.finish_start): the judge waits for the baseline beside the candidate's
    start, but its failure only ends the judgement where timing needs the baseline (ensure_baseline)."""
    try:
        base.finish_start()
    except ChildFailed as exc:
        raise RuntimeError(f"problem {problem.id}: the baseline worker failed to start: {exc.reason.detail}") from None


def known_quiet() -> float | None:
    """This card's idle flush time from the judge's cache (gauntlet.judge.timing.peaks.cached_quiet), or None."""
    try:
        return peaks.cached_quiet(torch.device("cuda"))
    except (RuntimeError, OSError):
        return None


def learn_quiet(base: Child) -> None:
    """Keep the idle flush time a baseline worker measured before any candidate existed (a gated start)."""
    try:
        peaks.remember_quiet(torch.device("cuda"), (base.hello or {}).get("quiet_ms"))
    except (RuntimeError, OSError):
        pass


def ensure_baseline(base: Child, problem, quiet: float | None) -> None:
    """The baseline worker's start finished (it is let go beside the candidate's start, in one shared turn: a
    failure there is said here, where timing needs the baseline); with `quiet` known, the idle flush time the quiet
    check compares against is the known one, never one measured while the candidate's worker was running beside
    it."""
    if base.hello is None:
        with turns.sharing(base.device):           # its GPU start-up, never beside another judge's timing
            finish_baseline_start(base, problem)
    if quiet is not None:
        base.hello["quiet_ms"] = min(quiet, float(base.hello.get("quiet_ms") or quiet))


def time_dtype(judge, spec, opts, record) -> None:
    problem = judge.problem
    for bench in (opts.shapes or problem.benchmark)[:opts.max_shapes]:
        shape = {d: bench[d] for d in problem.dims}
        try:
            entry, reasons = _time_shape_retried(judge, spec, shape, opts, record)
        except ChildFailed as exc:
            record.reasons.append(Reason(exc.reason.code, f"while timing {shape}: {exc.reason.detail}").to_json())
            return
        except BaselineFailed as exc:
            record.timings.append({"dtype": spec.name, "shape": shape, "source": bench.get("source", ""),
                                   "baselines": {}, "baseline_errors": {"worker": str(exc)}})
            if _candidate_could_kill(judge, str(exc)):
                record.reasons.append(Reason("tampering", f"while timing {shape}: the baseline worker was killed by "
                                             "a signal while the candidate's worker, unconfined, could send one: "
                                             f"{str(exc)[:500]}").to_json())
            # Otherwise not the candidate's doing: no reason against it, the entry says why there is no figure.
            return
        entry.update(source=bench.get("source", ""), spot_check="fail" if reasons else "pass")
        if entry.get("candidate_ms") is not None or entry.get("baseline_errors"):
            record.timings.append(entry)
        record.reasons += [r.to_json() for r in reasons]
        if reasons:
            return


# A shape crowded out of the card's memory is timed again after each of these pauses (gauntlet.judge.timing.timed).
CROWDED_WAITS_S = (1.0, 4.0, 10.0)


def _time_shape_retried(judge, spec, shape, opts, record):
    """A benchmark shape's inputs are the problem's, not sized to this judge's share of the card: where the
    candidate's worker ran out of memory building or running them while other judges were on the card (between
    their calls they still hold their cases' answers and inputs), the shape is timed again after each pause of
    CROWDED_WAITS_S, holding no turn meanwhile, so the other judges move on to other cases (a worker past its share
    is stopped by its own watchdog meanwhile). Out of memory every time, or alone on the card, it is the candidate's
    crash, as for a judge alone. The baseline worker alike (cuBLAS can run out of memory at a large shape beside
    other judgements, and a single retry a second later is not always enough: docs/benchmarks.md); out of memory
    every time, its entry says so (no reason against the candidate)."""
    for pause in CROWDED_WAITS_S + (None,):
        try:
            return _time_shape_alone(judge, spec, shape, opts, record)
        except ChildFailed as exc:
            if pause is None or not (turns.crowded_out(exc.reason, judge.device) and judge.child.alive):
                raise
        except BaselineFailed as exc:
            if pause is None or not (turns.crowded_out(Reason("crash", str(exc)), judge.device) and judge.base.alive):
                raise
        time.sleep(pause)       # (_time_shape handed this judge's memory back as the try ended)


def _candidate_could_kill(judge, detail: str) -> bool:
    """A baseline worker killed by a signal, in a run where the candidate's worker was not confined (Landlock's
    signal scope, verified): the candidate could have sent it, and a candidate with a poor ratio gains by leaving
    no ratio at all. Where it was confined it could not: a harness or machine failure, no reason against it."""
    if "killed by SIG" not in detail:
        return False
    from ..process.pids import signals_scoped
    return not signals_scoped(getattr(judge.child, "confinement", None))


# A side whose starved calls moved its median call time by more than the precision timing stops at
# (gauntlet.judge.timing.starved.starved_shift), or whose median is itself a starved call, was slowed by its host. A
# share of starved calls is no such rule: one starved first call per batch moves no median, and sending every shape
# that has one back to a quiet host would retime much of the suite for nothing (docs/benchmarks.md).
HOST_SHIFT = PRECISION


def _time_shape_alone(judge, spec, shape, opts, record):
    """One shape timed while this judge has the card to itself (gauntlet.judge.timing.turns: no other judge's
    correctness call or timing runs meanwhile). Where the quiet check still found the GPU busy and other judges share
    the card, the work it saw may be another judge's candidate's (work it left queued): the shape is timed once more,
    and if the card is busy again it gets no figure, with the reason in the entry, and no reason against this candidate.
    Alone on the card (no other judge), a busy GPU is this candidate's leftover work: `background_work`.

    The card alone is not the host alone: judges on the host's other GPUs go on with their correctness calls (process
    start-ups, GB-sized transfers, comparisons), and a host that busy can launch a call's work after the hold has run
    out, so the events count the host's delay as the GPU's (a Triton GEMM at parity with cuBLAS can read far below
    it). Where any side's starved calls (gauntlet.judge.timing.starved.starved_call) moved its median by
    more than HOST_SHIFT, or most of them were starved, while other judges were on this host, the shape is timed again
    with the host to this judge alone (turns.host_alone: no correctness call of any judge on any card meanwhile), and
    that figure stands (`host_alone`: true), starved or not: with the host quiet, a launch that outlasts the hold is the
    side's own.

    The entry says when the judge held the card and which card (`alone`: wall-clock seconds, the card's UUID), so
    that anyone can check from the records alone that no two candidates were timed on one card at once
    (gauntlet.executors.exclusive)."""
    # A side starved even with the host quiet is host-bound by design (a candidate that reads back to the host, then
    # launches per group; a baseline that does so is timed by its kernels and never starved): the judgement's later
    # shapes go straight to a quiet host instead of being timed twice.
    busy_times, host = 0, bool(getattr(judge, "host_bound", False)) and turns.host_others(judge.device) > 0
    while True:
        with turns.host_alone(judge.device) if host else turns.alone(judge.device):
            began = time.time()
            entry, reasons, busy, pending = _time_shape(judge, spec, shape, opts, record)
            # Microseconds: a judge waiting for the card stamps its start only after this one has let go, and a
            # coarser rounding could make two such spans touch.
            entry["alone"] = {"card": turns.card(judge.device), "from": round(began, 6),
                              "until": round(time.time(), 6)}
            retime = not host and host_starved(entry) and turns.host_others(judge.device) > 0
            if pending and retime:
                pending.drop()         # a figure the busy host set: not kept, so not spot-checked
            elif pending:
                # The figure stands: the card shared from here, its spots fetched and the workers' buffers let go
                # before the turn ends (gauntlet.judge.timing.spots).
                turns.share_now(judge.device)
                pending.fetch()
        if host:
            entry["host_alone"] = True
            if host_starved(entry):
                judge.host_bound = True
        if busy and turns.others(judge.device) > 0:
            busy_times += 1
            if busy_times < 2:
                continue
            detail = (f"the GPU was busy while the baselines were timed, twice, and {turns.others(judge.device)} "
                      "other judge(s) share this card: the work may be another judge's candidate's, so no figure "
                      "and no verdict from it")
            return {"dtype": spec.name, "shape": shape, "baselines": {}, "baseline_errors": {"shared_gpu": detail}}, []
        if pending and retime:
            host = True
            continue
        # The figure stands: its spots judged, and its physics (gauntlet.judge.timing.spots).
        return entry, reasons + (pending.settle() if pending else [])


def host_starved(entry: dict) -> bool:
    """Whether the host's delays set any side's figure in a timing entry: its starved calls moved its median call
    time by more than HOST_SHIFT, or were half or more of its calls (`starved_shift` None)."""
    sides = [entry] + list((entry.get("baselines") or {}).values())
    for side in sides:
        starved, calls = (side.get("starved_calls") or [0, 0])[:2]
        if not (calls and starved):
            continue
        shift = side.get("starved_shift")
        if shift is None or shift > HOST_SHIFT:
            return True
    return False


def _time_shape(judge, spec, shape, opts, record):
    try:
        return _time_shape_held(judge, spec, shape, opts, record)
    finally:
        if judge.device == "cuda":
            torch.cuda.empty_cache()       # whatever the shape's end, its memory goes back to the card


def _time_shape_held(judge, spec, shape, opts, record):
    problem = judge.problem
    phases = Phases()
    with phases("expected"):
        probe = _probe(judge, shape, spec)
    if probe is None:
        return {"dtype": spec.name, "shape": shape, "baselines": {}}, \
            [Reason("crash", f"the judge ran out of GPU memory building {shape}'s answer while the candidate's "
                             "process held the card")], False, None
    request = {"shape": shape, "dtype": spec.name, "max_blob": replies.blob_cap(probe.oracle.numel())}
    outputs = TimedOutputs(problem, spec, shape, probe, judge.device)     # every timed output, checked
    del probe
    if judge.device == "cuda":
        # The answer was built for its size (and to know the judge can build it) and is built again for the spot
        # checks, after both workers have let their timing inputs go. Kept in the allocator's reserve meanwhile it
        # takes the workers' room: a large answer (fp8_gemm_rowwise's widest, its conventions in fp64, holds tens of
        # GB) would stay there while the workers build their timing inputs, and they would run out of memory.
        torch.cuda.empty_cache()
    schedule = Schedule(judge.child, judge.base, list(problem.baselines), request,
                        timeout=opts.case_timeout_s + 2 * opts.timing_budget_s, declared=judge.declared,
                        custom=judge.custom, seed=record.seed or 0, phases=phases, outputs=outputs)
    try:
        schedule.run(opts.timing_budget_s)
    except TimingRejected as exc:
        schedule.reasons += exc.reasons
    except BaseException:
        schedule.end()
        raise
    busy = schedule.busy_gpu and all(r.code == "background_work" for r in schedule.reasons)
    if schedule.reasons or "candidate" not in schedule.samples:
        schedule.end()
        return {"dtype": spec.name, "shape": shape, "baselines": {}}, schedule.reasons or \
            [Reason("crash", f"no timed call of the candidate completed on {shape}")], busy, None
    try:
        figs = schedule.figures()
        entry = _entry(problem, spec, shape, figs, schedule, record, opts.peaks)
    except BaseException:
        schedule.end()
        raise
    # The workers keep the shape's buffers (the last batch's outputs) until the spots are fetched, in this turn made
    # shared (gauntlet.judge.timing.spots).
    return entry, [], False, spots.Pending(judge, spec, shape, schedule, entry, figs, opts, record)


def _probe(judge, shape, spec):
    """The shape's expected output (its size caps what a timing reply may carry), or None where the card has no room
    for it. Another judge's worker past its share of the card is stopped by its own watchdog within a poll
    (gauntlet.judge.process.watchdog), so with other judges on the card it is asked again once, a second later; a
    judge alone on the card that runs out of memory was crowded out by its own candidate."""
    problem = judge.problem
    for attempt in (0, 1):
        try:
            return expected_for(problem, make_inputs(problem, shape, spec, 0, judge.device), spec)
        except torch.OutOfMemoryError:
            if attempt or judge.device != "cuda" or turns.others(judge.device) == 0:
                return None
            torch.cuda.empty_cache()
            time.sleep(1.0)
    return None


def interval(side: dict, cand: dict, waits: bool, seed: int) -> list[float]:
    """The speedup's reported 95% interval: paired over rounds, widened by the floor of its kind (scoring: a
    baseline timed through its host launches moves more from run to run than its rounds show; `waits` says it
    was, and is false for one timed by its kernels)."""
    floor = scoring.HOST_BOUND_FLOOR if waits else None
    return list(scoring.paired_speedup_ci(side["rounds"], cand["rounds"], seed=seed, floor=floor))


def _entry(problem, spec, shape, figs, schedule, record, ceilings) -> dict:
    cand = figs["candidate"]
    itemsize = spec.torch_dtype().itemsize
    flops, nbytes = problem.flops(shape), problem.bytes(shape, itemsize, itemsize)
    entry = {"dtype": spec.name, "shape": shape, "candidate_ms": cand["ms"], "candidate_host_ms": cand["host_ms"],
             "mode": "held", "hold_ms": round(schedule.hold_ms, 3), "reps": cand["calls"],
             "rounds": len(cand["rounds"]), "calls_per_batch": schedule.calls,
             "clock_gap_ms": cand["clock_gap_ms"], "kernels": cand["kernels"][:8], "window_us": cand["window_us"],
             "starved_calls": cand["starved_calls"], "starved_shift": cand["starved_shift"],
             "starved_where": cand["starved_where"], "tflops": flops / cand["ms"] / 1e9,
             "gbps": nbytes / cand["ms"] / 1e6, "baselines": {}}
    entry["outside_clock"] = schedule.outside.get("summary")
    peak = (ceilings.get(spec.name) or {}).get("tflops")
    entry["peak_fraction"] = entry["tflops"] / peak if peak else None
    entry["bw_fraction"] = entry["gbps"] / ceilings["copy_gbps"] if ceilings.get("copy_gbps") else None
    if schedule.errors:
        entry["baseline_errors"] = dict(schedule.errors)
    for label, side in figs.items():
        if label == "candidate":
            continue
        entry["baselines"][label] = {
            "ms": side["ms"], "speedup": side["ms"] / cand["ms"], "mode": "held",
            "ci95": interval(side, cand, label in schedule.waits and side.get("timed_by") != "kernels",
                             record.seed or 0),
            "tflops": flops / side["ms"] / 1e9, "note": schedule.notes.get(label, ""), "host_ms": side["host_ms"],
            "clock_gap_ms": side["clock_gap_ms"], "kernels": side["kernels"][:4], "window_us": side["window_us"],
            "starved_calls": side["starved_calls"], "starved_shift": side["starved_shift"],
            "starved_where": side["starved_where"], "disturbed_batches": schedule.disturbed.get(label, [0, 0])}
        if label in schedule.waits:
            entry["baselines"][label]["waits_for_gpu"] = True
        if side.get("timed_by"):
            entry["baselines"][label].update(timed_by=side["timed_by"], host_inclusive_ms=side["host_inclusive_ms"])
    return entry
