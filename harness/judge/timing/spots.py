"""A timed shape's output checks, done once its turn alone on the card is over.

A timed shape holds the card alone (gauntlet.judge.timing.turns) while its rounds run: no other judge's correctness
call or timing meanwhile. Every candidate batch's outputs were taken by the judge right after the batch's reply
(gauntlet.judge.values.taken): what every call's cheap checks need, and whole copies of the calls picked for a full
check (the spots: bench.SPOT_CHANCE per batch, and the final spots' candidates, bench.SPOTS of every batch's calls,
of which the last batch's stand). Judging them needs no quiet card: building each answer and comparing is a
correctness call like any other. Done inside the turn, the spots would be a large share of the time a suite holds
the card alone, while the other judges wait (docs/benchmarks.md). So:
- `Pending.fetch`, in the shape's own turn once it is made shared (turns.share_now): the final spots picked, then
  the workers' timing buffers let go. The other judges' correctness calls go on meanwhile; no judge's timing starts
  before the buffers are gone (a timing set can outgrow a judge's share of the card).
- `Pending.settle`, after the turn: the spots judged in a shared turn of their own (alone where the answer
  outgrows the judge's share, or ran out of memory beside other judges), then every timed call's checks, then the
  physics floor and the second clock.

What stays inside the turn alone: the rounds, with the outputs taken after each batch, and the decision to time the
shape again (gauntlet.judge.timing.timed), which reads only the rounds. Only the attempt whose figure stands is
checked; a discarded attempt's workers let their buffers go (`drop`).
"""
from __future__ import annotations

import time

import torch

from ... import protocol
from ...inputs import make_inputs
from . import peaks, turns
from .bench import SPOTS
from ..values import check, conventions, fuzz, memory
from ..values.oracle import expected_for
from ...reasons import Reason


def final_spots(schedule) -> None:
    """The guaranteed spots from the last candidate batch's whole copies (`final`: picked with SystemRandom right
    after its reply, before the worker ran again), up to SPOTS spots in all."""
    final = list(getattr(schedule, "final", None) or range(schedule.calls))
    while len(schedule.spots) < min(SPOTS, schedule.calls) and not schedule.reasons:
        taken = {index for index, _, _ in schedule.spots}
        index = schedule.rng.choice([i for i in final if i not in taken] or final)
        schedule.spots.append((index, *schedule._spot(index)))


class Pending:
    """A timed shape whose rounds are over and whose figure stands, its spot checks and physics still to come."""

    def __init__(self, judge, spec, shape, schedule, entry: dict, figs: dict, opts, record):
        self.judge, self.spec, self.shape, self.schedule = judge, spec, shape, schedule
        self.entry, self.figs, self.opts, self.record = entry, figs, opts, record

    def fetch(self) -> None:
        """The guaranteed spots fetched, then the workers let their timing buffers go. Call it in the shape's own
        turn, made shared (turns.share_now): the workers' buffers (a timing set can outgrow a judge's share of the
        card) never outlive the turn that let them be built, and no other judge's timing starts before they are
        gone, while the other judges' correctness calls go on."""
        try:
            final_spots(self.schedule)
        finally:
            self.drop()

    def settle(self) -> list[Reason]:
        """Judge the fetched spots with the card shared (alone where their answer outgrows this judge's share of the
        card, or, beside other judges, ran out of memory shared), then the physics floor (a ceiling measured again
        takes a turn alone of its own) and the second clock. Call it holding no turn, after `fetch`."""
        schedule = self.schedule
        if schedule.reasons:               # a malformed reply while fetching (Schedule._spot): that is the verdict
            self.entry["phases_s"] = schedule.phases.record()
            return list(schedule.reasons)
        with schedule.phases("spot_checks"):
            # The outside clock's proofs too: each long span's last output (gauntlet.judge.timing.outside).
            proofs = schedule.outside.get("proofs", [])
            reasons = _judge_spots(self.judge, self.spec, self.shape, schedule.spots + proofs, self.record)
        outputs = getattr(schedule, "outputs", None)
        if not reasons and outputs is not None:
            with schedule.phases("output_checks"):       # every timed call's (gauntlet.judge.values.taken)
                repro = lambda seed: fuzz.repro(self.record, self.spec, self.shape, seed)  # noqa: E731
                reasons = _shared(self.judge, self.spec, self.shape, lambda: outputs.judge(repro))
            self.entry["output_checks"] = outputs.summary()
        self.entry["phases_s"] = schedule.phases.record()
        ceilings = self.opts.peaks
        reasons += peaks.physics(self.entry, ceilings, peaks.remeasure(self.judge, self.spec) if ceilings else None)
        reasons += schedule.second_clock(self.figs)
        return reasons

    def drop(self) -> None:
        """The workers let the shape's timing buffers go (the kept outputs too) and both run again."""
        try:
            self.schedule.end()            # the judge's mapping of the worker's timing buffer goes first (bench)
        finally:
            if self.judge.device == "cuda":
                torch.cuda.empty_cache()


def _judge_spots(judge, spec, shape, spots, record) -> list[Reason]:
    return _shared(judge, spec, shape, lambda: spot_checks(judge, spec, shape, spots, record))


def _shared(judge, spec, shape, check) -> list[Reason]:
    """check() run with the card shared, or alone where a full answer outgrows this judge's share or ran out of
    memory beside other judges."""
    device = judge.device
    if device == "cuda" and not _fits_share(judge.problem, shape, spec):
        with turns.alone(device):
            return check()
    try:
        with turns.sharing(device):
            return check()
    except torch.OutOfMemoryError:
        if device != "cuda" or turns.others(device) == 0:
            raise
    # Pushed out beside other judges: once more with the card alone, a second later, as a correctness call is
    # (gauntlet.judge.calls.Judge.run_call: a worker past its share is stopped by its watchdog within a poll).
    torch.cuda.empty_cache()
    time.sleep(1.0)
    with turns.alone(device):
        return check()


def _fits_share(problem, shape, spec) -> bool:
    """Whether a spot check's answer at this shape (a case of one call, by the fuzzing's memory model) fits this
    judge's share of the card: a benchmark shape is the problem's, not sized to any share (fp8_gemm_rowwise's
    widest answer, its conventions in fp64, holds tens of GB)."""
    try:
        total = torch.cuda.mem_get_info()[1]
    except (RuntimeError, AssertionError):      # no card to read: nothing to share
        return True
    share = memory.MemoryBudget("cuda", total, memory.judges_per_gpu())
    return memory.case_bytes(problem, shape, spec.torch_dtype().itemsize, 1) <= share.usable


def spot_checks(judge, spec, shape, spots, record) -> list[Reason]:
    """Outputs of timed calls chosen after the fact are judged like any other: fast-and-wrong fails here."""
    reasons = []
    if not spots:
        return [Reason("crash", f"no timed call on {shape} could be spot-checked")]
    for index, header, blobs in spots:
        if not header:
            continue
        inputs = make_inputs(judge.problem, shape, spec, header["seed"], judge.device)
        expected = expected_for(judge.problem, inputs, spec)
        found = check.structural_reasons(header["meta"], expected, judge.device, judge.problem.output_layout)
        if not found:
            out = protocol.tensor_from_wire(header["wire"], blobs[0]).to(judge.device)
            found = conventions.value_reasons(out, expected, spec)
        for r in found:
            r.detail = f"[timed call, {spec.name} {shape}] {r.detail}"
            r.repro = fuzz.repro(record, spec, shape, header["seed"])
        reasons += found
        del inputs, expected
        if found:
            break
    return reasons
