"""The timing schedule, run by the trusted parent: candidate and baselines in separate processes, in short rounds.

Why two processes: in the candidate's process anything it does (a patched torch function, a switch set at import, a
thread) can slow a baseline. The baselines run in a worker that never imported candidate code (role `baseline`).

One round = one short batch of timed calls per side, in a shuffled order. While one side's batch runs, the other
worker is SIGSTOPped (its escaped processes too), so nothing of the candidate runs while a baseline is timed.
Work the candidate might have left queued on the GPU before it was stopped would share the GPU with the baseline:
the baseline worker times its L2 flush before every call and compares it with the flush time it measured at start-up,
before any candidate existed (the quiet check). Rounds pair up the two sides close in time, so clock and thermal
drift cancel in the ratio; the speedup's interval is a bootstrap over rounds (paired).

Every timed call is a checked call: the profiler runs around each one, and the parent judges each call's kernels
(gauntlet.judge.process.kernels) and whether each of them ran inside the call's measured window
(gauntlet.judge.timing.window: a kernel beside the hold or past the end event is `tampering`; the baseline's calls are
checked alike, and a failure there is a harness bug). Every candidate output is checked too: each call's snapshot
goes into the judge's own GPU memory, which the judge reads right after the reply, the worker stopped, for every
call's checks and whole copies of a few calls it picks (the spots): gauntlet.judge.values.taken.

The hold's length is the judge's: HOLD_MS (gauntlet.gpu, the hold of every correctness call too), longer only when a
baseline's own host launch, measured in the clean worker, needs more; never derived from the candidate's launch (a
slow launch would buy a longer blind window), nor from a baseline whose call waits for the GPU (a host sync inside
it: no hold covers its launches, which start only once the hold has run out). A candidate whose launch outlasts the
hold pays for it in its time.

A coarse second clock (each batch's wall time less an empty batch's, per call, against the baseline's gap) catches
a gross lie; per-call overhead is milliseconds, so the bound that holds a figure to a few percent is the outside
clock's, run after the rounds: spans of calls back to back, timed from the parent (gauntlet.judge.timing.outside).
"""
from __future__ import annotations

import random
import time
from contextlib import nullcontext

from ...gpu import HOLD_MS
from ..process import kernels, replies
from ..process.isolate import Child, ChildFailed
from . import figures, outside, scoring, window
from .figures import Phases
from ...reasons import Reason

HOLD_CAP_MS = 50.0          # the most a baseline's slow host launch can lengthen the hold (the candidate's never does)
CALLS_PER_BATCH = 5
# A shape whose MIN_ROUNDS alone would overrun its budget (a naive kernel at the largest shapes: seconds a call, most of
# a minute on the card for a figure far below 1x) stops at the budget after FLOOR_ROUNDS, with the interval they give.
MIN_ROUNDS, MAX_ROUNDS, FLOOR_ROUNDS = 8, 40, 3
# Timing stops once every baseline's paired ratio is known to within this (the half-width of a robust interval on
# the rounds' log ratios, relative: scoring.round_ratio_halfwidth), or at MAX_ROUNDS / the shape's budget, so a steady
# pair stops early. The reported interval (a bootstrap, widened by scoring.SYSTEMATIC_FLOOR): from the rounds run.
PRECISION = 0.0075
BOOTSTRAP_PRECISION = 0.015  # and the reported (bootstrap) interval, before its systematic floor, within +-1.5%
# A baseline whose calls wait for the GPU (a host sync inside: `waits_for_gpu`) is timed by its kernels' busy time in
# each window (window.busy_us: the same kernels back to back, as a CUDA graph of its loop would run them), since this
# host's sync and launches move from process to process beyond what rounds remove (docs/benchmarks.md); its events'
# figure is kept as host_inclusive_ms. Without a profiler timeline it is timed through its launches and holds nothing:
# it gets the rounds the other baselines need (MIN_ROUNDS at least), or, where all are timed so, these.
WAIT_PRECISION, WAIT_BOOTSTRAP_PRECISION = 0.05, 0.10
SPOTS = 2                   # at least this many fully checked timed calls per shape (every call gets values.sampled's)
# Each candidate batch also gets a full check with this chance. One in 16: a full check of a large output is slow.
SPOT_CHANCE = 1 / 16
# A flush slower than this marks a baseline batch as disturbed. With an honest, stopped candidate a few batches still
# see flushes several times the idle one, all under a millisecond: so the slack is 1 ms (a time slice given to
# another context is longer), and a baseline is ruled disturbed only when at least QUIET_SHARE of its batches are.
QUIET_FACTOR, QUIET_SLACK_MS, QUIET_SHARE, QUIET_MIN = 2.0, 1.0, 0.25, 3


class BaselineFailed(Exception):
    """The baseline worker failed: the problem's or the harness's fault, never the candidate's."""


class TimingRejected(Exception):
    def __init__(self, reasons: list[Reason]):
        super().__init__("; ".join(r.detail for r in reasons))
        self.reasons = reasons


def _ask(active: Child, others: list[Child], request: dict, timeout: float, what: str, max_blob: int = 0,
         phases: Phases | None = None):
    """One request to `active` while every other worker is stopped. Returns (header, blobs, wall ms)."""
    with phases("stop") if phases else nullcontext():
        for other in others:
            other.stop()
    clock: dict = {}               # the worker's time alone, the judge's work around the request left out
    try:
        header, blobs = active.request(request, timeout=timeout, what=what, max_blob=max_blob, clock=clock)
    except ChildFailed as exc:
        if active.role == "baseline":
            raise BaselineFailed(f"{exc.reason.code}: {exc.reason.detail}"[:3000]) from None
        raise
    wall = (clock["replied"] - clock["sent"]) * 1e3
    if not header.get("ok"):
        detail = str(header.get("detail", ""))[:3000]
        if active.role == "baseline":
            raise BaselineFailed(detail)
        raise ChildFailed(Reason("crash", f"while timing: {detail}"))
    return header, blobs, wall


class Schedule:
    """Times one (dtype, shape): the candidate's worker against the baseline worker."""

    def __init__(self, cand: Child, base: Child, labels: list[str], request: dict, timeout: float,
                 declared: frozenset, custom: bool, seed: int = 0, phases: Phases | None = None, outputs=None):
        """`seed`: the one the record's bootstrap interval is drawn with (gauntlet.judge.timing.timed), so the stopping
        rule checks the very interval that will be reported. `phases`: where the shape's time is counted (the
        caller's, when it times parts of the shape too). `outputs`: the candidate's timed outputs, taken after each
        batch (gauntlet.judge.values.taken.TimedOutputs; None only in tests of the schedule itself)."""
        self.seed, self.outputs, self.cand, self.base, self.labels = seed, outputs, cand, base, labels
        self.request, self.timeout, self.declared, self.custom = request, timeout, declared, custom
        self.rng = random.SystemRandom()
        self.quiet_ms = float(base.hello.get("quiet_ms") or 0.0)
        self.samples: dict = {}            # label -> list of per-round dicts
        self.notes, self.errors, self.reasons = {}, {}, []
        self.spots: list[tuple[int, dict, list]] = []
        self.final: list[int] = []         # calls of the last candidate batch copied whole, for the final spots
        self.disturbed: dict = {}          # baseline label -> [disturbed batches, batches]
        self.waits: set[str] = set()       # baselines whose calls wait for the GPU (`run`)
        self.by_kernels: set[str] = set()  # of those, the ones timed by their kernels' busy time (`_take`)
        self.busy_gpu = False              # the quiet check ruled the GPU busy (its reason is in self.reasons)
        self.phases = phases or Phases()   # where the shape's wall time went (figures.Phases)
        self.outside: dict = {}            # the outside clock's spans (gauntlet.judge.timing.outside)

    # -- set-up --------------------------------------------------------------------------------------------------
    def setup(self) -> dict:
        probes = {}
        for child, labels in ((self.base, self.labels), (self.cand, ["candidate"])):
            other = self.cand if child is self.base else self.base
            with self.phases("setup"):
                header, _, _ = _ask(child, [other], dict(self.request, op="bench_setup"), self.timeout,
                                    f"warming up {labels}")
            try:
                sides = replies.setup(header, labels)
            except replies.BadReply as exc:
                raise TimingRejected([self._bad_reply(child, exc)]) from None
            for label, side in sides.items():
                if "error" in side:
                    if child is self.cand:
                        raise ChildFailed(Reason("crash", side["error"]))
                    self.errors[label] = side["error"]
                else:
                    probes[label] = side
                    self.notes[label] = str(side.get("note", ""))[:500]
        return probes

    def _bad_reply(self, child: Child, exc: Exception) -> Reason:
        if child is self.base:
            raise RuntimeError(f"the baseline worker sent a malformed reply: {exc}")   # a harness bug
        return Reason("tampering", f"malformed timing reply from the candidate's process: {exc}")

    # -- rounds --------------------------------------------------------------------------------------------------
    def run(self, budget_s: float) -> None:
        probes = self.setup()
        sides = ["candidate"] + [label for label in self.labels if label in probes]
        baselines = [s for s in sides if s != "candidate"]
        # A baseline whose call waits for the GPU (probe `waits_for_gpu`) returns only after the hold has run out,
        # whatever its length: a hold sized to its launch buys nothing and costs every side's every call (for
        # grouped_gemm_moe's cublas_loop it would be many times the candidate's call).
        self.waits = {s for s in baselines if probes[s].get("waits_for_gpu")}
        launches = [1.5 * probes[s]["host_ms"] + 0.2 for s in baselines if s not in self.waits]
        hold_ms = min(HOLD_CAP_MS, max([HOLD_MS] + launches))
        per_call = {s: probes[s]["probe_ms"] + hold_ms + 1.0 for s in sides}
        slowest = max(per_call.values())
        calls = max(2, min(CALLS_PER_BATCH, int(200.0 / slowest)))
        fit = int(budget_s * 1e3 / sum(calls * per_call[s] + 20.0 for s in sides))   # rounds the budget holds
        least = MIN_ROUNDS if fit >= MIN_ROUNDS else max(FLOOR_ROUNDS, fit)
        self.hold_ms, self.calls = hold_ms, calls
        deadline = time.monotonic() + budget_s
        for r in range(max(least, min(MAX_ROUNDS, fit))):
            if r >= least and (time.monotonic() > deadline or self.stop_now(baselines)):
                break          # the estimate above leaves out per-call overheads (profiler, refill): wall time rules
            order = list(sides)
            self.rng.shuffle(order)
            for label in order:
                self._batch(label, r, calls, hold_ms, spot=(label == "candidate" and self.rng.random() < SPOT_CHANCE))
                if self.reasons:
                    return
        outside.run(self, baselines)
        # The guaranteed spots (SPOTS): the last batch's `final` copies, after the turn alone (spots.final_spots).

    def stop_now(self, baselines: list[str]) -> bool:
        with self.phases("stopping_rule"):
            return self.precise_enough(baselines)

    def precise_enough(self, baselines: list[str]) -> bool:
        """Whether every baseline's speedup (every one not timed through its host launches, where there is one) is
        known to within PRECISION (scoring.round_ratio_halfwidth; WAIT_PRECISION for one timed through its host
        launches: one that waits, where no profiler timeline gives its kernels' time), and the
        figure the record reports (the ratio of the pooled medians) agrees with the rounds' centre to within it as
        well: where the first rounds are disturbed, the rounds' centre settles while the pooled ratio, pulled by the
        baseline's slow calls, can still be far off (docs/benchmarks.md)."""
        cand = {r["round"]: r["ms"] for r in self.samples.get("candidate", [])}
        hosted = self.waits - self.by_kernels     # timed through host launches (no profiler timeline)
        for label in [b for b in baselines if b not in hosted] or baselines:
            base = {r["round"]: r["ms"] for r in self.samples.get(label, [])}
            precision, boot = (WAIT_PRECISION, WAIT_BOOTSTRAP_PRECISION) if label in hosted else \
                (PRECISION, BOOTSTRAP_PRECISION)
            if scoring.round_ratio_halfwidth(base, cand) > precision:
                return False
            if abs(scoring.pooled_vs_rounds(base, cand)) > precision:
                return False
            # And the interval the record will report is narrow: a few disturbed rounds, resampled, can widen it far
            # past the rounds' own half-width. A cheap draw first; then the reported one itself (its seed and size:
            # a bootstrap of medians over few rounds can be bimodal, so a stop the cheap draw passes can still report
            # a wide interval; docs/benchmarks.md).
            ratio = scoring.pooled_ratio(base, cand)
            for seed, n in ((len(cand), 400), (self.seed, scoring.BOOTSTRAP_N)):
                low, high = scoring.paired_speedup_ci(base, cand, seed=seed, n=n, floor=0.0)
                if not (high - low) <= 2 * boot * ratio:
                    return False
        return True

    def _batch(self, label: str, r: int, calls: int, hold_ms: float, spot: bool) -> None:
        child, other = (self.cand, self.base) if label == "candidate" else (self.base, self.cand)
        side = "candidate" if child is self.cand else "baseline"
        # An empty batch first: the same request path with no call, so the second clock can take each worker's
        # per-request cost (state checks, reply) out of the batch's wall time.
        empty = {"op": "bench_batch", "side": label, "calls": 0, "hold_ms": hold_ms}
        with self.phases("empty " + side):
            header, _, empty_wall = _ask(child, [other], empty, self.timeout, f"timing {label}", phases=self.phases)
        try:
            replies.batch(header, 0)
        except replies.BadReply as exc:
            self.reasons.append(self._bad_reply(child, exc))
            return
        request = {"op": "bench_batch", "side": label, "calls": calls, "hold_ms": hold_ms}
        if self.outputs is not None:      # without a shared buffer both sides pay for the outputs' copies alike
            request.update(drop=self.outputs.handle(calls) if label == "candidate" else None,
                           hand_over=bool(self.outputs.drop_error))
        with self.phases("batches " + side):
            header, blobs, wall = _ask(child, [other], request, self.timeout, f"timing {label}", phases=self.phases,
                                       max_blob=self.request["max_blob"])
        if label == "candidate" and self.outputs is not None:
            self.cand.stop()           # before its outputs are read: nothing of the worker runs until they are
            self._take_outputs(header, blobs, calls, spot)
        with self.phases("checks"):
            self._take(child, label, r, calls, header, wall, empty_wall)

    def _take(self, child: Child, label: str, r: int, calls: int, header: dict, wall: float, empty_wall: float):
        """A batch's reply, read and judged: its windows, its kernels, the quiet check; its calls kept."""
        try:
            replies.batch(header, calls)
            outside, margins = window.batch_problems(header)
        except (replies.BadReply, window.BadTimeline) as exc:
            self.reasons.append(self._bad_reply(child, exc))
            return
        if outside:
            i, text = outside[0]
            if child is self.base:       # the clean worker's own calls: the window itself is wrong
                raise RuntimeError(f"harness bug: baseline {label!r}'s timed call ran outside its own window: {text}")
            self.reasons.append(Reason("tampering", f"[timed call {i + 1} of a batch] {text}"))
            return
        sample = {"round": r, "ms": header["ms"], "host_ms": header["host_ms"], "flush_ms": header["flush_ms"],
                  "wall_per_call": max(0.0, wall - empty_wall) / calls, "calls": header["calls"], "window": margins}
        busy = [m.get("busy_us") for m in margins]
        if label in self.waits and busy and all(isinstance(b, (int, float)) and b > 0 for b in busy):
            # Its events time this host's sync and launches as much as the GPU: its figure is its kernels'.
            sample.update(ms=[b / 1e3 for b in busy], event_ms=header["ms"])
            self.by_kernels.add(label)
        self.samples.setdefault(label, []).append(sample)
        if label == "candidate":
            self._check_candidate_batch(header)
        else:
            self._check_quiet(label, header)

    def _check_candidate_batch(self, header: dict) -> None:
        if header.get("state"):
            self.reasons.append(Reason("tampering", "changed during timing: " + ", ".join(header["state"][:10])))
        if header.get("background"):
            self.reasons.append(Reason("background_work", f"during timing: {header['background']}"))
        if header.get("shared_outputs"):
            self.reasons.append(Reason("output_retained", f"during timing: {header['shared_outputs']} of "
                                       f"{len(header['ms'])} timed calls returned memory that an earlier output of "
                                       "the same batch, still alive, also uses (a reused buffer: a caller keeping "
                                       "two results sees the first overwritten)"))
        if self.custom:
            for i, call in enumerate(header["calls"]):
                found = kernels.call_problems(call, "cuda", self.declared, timed=True)
                if found:
                    self.reasons.append(Reason("forbidden_op", f"[timed call {i + 1} of a batch] {found[0]}"))
                    return

    def _check_quiet(self, label: str, header: dict) -> None:
        """Work of the (stopped) candidate still on the GPU shares it with the baseline: the flush slows down."""
        worst = max(header["flush_ms"])
        count = self.disturbed.setdefault(label, [0, 0])
        count[1] += 1
        if self.quiet_ms and worst > QUIET_FACTOR * self.quiet_ms + QUIET_SLACK_MS:
            count[0] += 1
        if count[0] >= QUIET_MIN and count[0] >= QUIET_SHARE * count[1]:
            self.busy_gpu = True            # gauntlet.judge.timing.timed asks whether another judge could have done it
            self.reasons.append(Reason("background_work", f"while baseline {label!r} was timed (the candidate's "
                                       f"processes stopped) the GPU was busy in {count[0]} of {count[1]} batches: "
                                       f"its L2 flush took up to {worst:.3f} ms, {self.quiet_ms:.3f} ms when idle: "
                                       "GPU work the candidate left queued"))

    def _take_outputs(self, header: dict, blobs: list, calls: int, spot: bool) -> None:
        """Every call's output taken (values.taken); whole copies of the final spots (any batch may be the last)."""
        self.final, index = self.rng.sample(range(calls), min(SPOTS, calls)), self.rng.randrange(calls)
        with self.phases("take outputs"):
            try:
                self.outputs.take(header, blobs, calls, set(self.final) | ({index} if spot else set()))
            except ValueError as exc:               # values.taken.BadOutputs, or a blob that is not a tensor
                return self.reasons.append(self._bad_reply(self.cand, exc))
        if spot:
            self.spots.append((index, *self._spot(index)))

    def _spot(self, index: int):
        """The judge's whole copy of call `index` of the last candidate batch, taken right after its reply."""
        return self.outputs.copy(index) if self.outputs is not None else ({}, [])

    def end(self) -> None:
        if self.outputs is not None:
            self.outputs.close()           # the judge's mapping of the worker's buffer goes before the buffer does
        with self.phases("end"):
            for child in (self.cand, self.base):
                if child.alive:
                    try:
                        _ask(child, [], {"op": "bench_end"}, 60.0, "releasing timing buffers")
                    except (ChildFailed, BaselineFailed):
                        pass
            self.cand.cont()
            self.base.cont()

    # -- figures (gauntlet.judge.timing.figures) ---------------------------------------------------------------
    def figures(self) -> dict:
        return figures.of(self.samples, self.by_kernels)

    def second_clock(self, figs: dict) -> list[Reason]:
        return figures.second_clock(figs) + outside.judge(self, figs)
