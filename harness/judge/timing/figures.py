"""What a timed shape's rounds come to (gauntlet.judge.timing.bench): each side's figures, the second clock that
bounds how far a candidate's events may under-report, and where the shape's wall time went (`phases_s`).
"""
from __future__ import annotations

import statistics
import time
from collections import defaultdict
from contextlib import contextmanager

from ..process import kernels
from . import scoring, window
from .starved import starved_flags, starved_shift, starved_where
from ...reasons import Reason

# The second clock's tolerance. Per call the parent also sees refill, flush, hold and a profiler session start and
# stop: milliseconds a call, most of it the profiler's, and seen from the parent (less the empty batch) that overhead
# varies from call to call and between two workers running the same code by up to about half again
# (docs/benchmarks.md). So a candidate's overhead may be up to twice its baseline's plus 1 ms: the clock
# bounds gross under-reporting only (see README, threat model).
CLOCK_SLACK_MS, CLOCK_OVERHEAD_FACTOR, CLOCK_FRACTION = 1.0, 2.0, 0.10


def of(samples: dict, by_kernels: set | frozenset = frozenset()) -> dict:
    """Per side: median GPU ms, median host launch ms, per-round medians; per baseline: speedup, paired CI. A side in
    `by_kernels` (a baseline that waits for the GPU: gauntlet.judge.timing.bench) has its kernels' busy time as its
    calls' ms, its events' median kept as `host_inclusive_ms`; the host's delays are taken out of it, so no call of
    it counts as starved."""
    out = {}
    for label, rounds in samples.items():
        ms = [x for r in rounds for x in r["ms"]]
        events = [r.get("event_ms", r["ms"]) for r in rounds]
        gaps = [r["wall_per_call"] - statistics.mean(e) for r, e in zip(rounds, events)]
        margins = [m for r in rounds for m in r.get("window", [])]
        starvable = [dict(r, window=None) for r in rounds] if label in by_kernels else rounds
        starved = sum(flag for _, flag in starved_flags(starvable))
        shift = starved_shift(starvable)
        out[label] = {"ms": scoring.median(ms), "host_ms": scoring.median([x for r in rounds for x in r["host_ms"]]),
                      "calls": len(ms), "starved_calls": [starved, len(ms)],
                      "starved_shift": None if shift is None else round(shift, 5),
                      "starved_where": starved_where(rounds),
                      "rounds": {r["round"]: r["ms"] for r in rounds},
                      "clock_gap_ms": scoring.median(gaps),
                      "kernels": kernels.summary([c for r in rounds for c in r["calls"]]),
                      "window_us": window.least_margins(margins)}
        if label in by_kernels:
            out[label].update(timed_by="kernels", host_inclusive_ms=scoring.median([x for e in events for x in e]))
    return out


def second_clock(figs: dict) -> list[Reason]:
    cand = figs["candidate"]
    base_gaps = [f["clock_gap_ms"] for label, f in figs.items() if label != "candidate"]
    if not base_gaps:
        return []
    base_gap = min(base_gaps)
    allowed = CLOCK_OVERHEAD_FACTOR * base_gap + CLOCK_SLACK_MS + CLOCK_FRACTION * cand["ms"]
    if cand["clock_gap_ms"] > allowed:
        return [Reason("tampering", f"the parent's clock saw {cand['clock_gap_ms'] + cand['ms']:.3f} ms per timed "
                                    f"call where the candidate's events report {cand['ms']:.3f} ms (the "
                                    f"baseline's overhead per call is {base_gap:.3f} ms): the events "
                                    "under-report the GPU time")]
    return []


class Phases:
    """Where a timed shape's wall time goes, measured by the parent as it runs (the timing entry's `phases_s`):
    `setup` (both sides' warm-up and probe), `empty` and `batches` per side (the second clock's empty requests and
    the timed batches, as the parent waits for them; `stop`, stopping the other worker first, is part of both),
    `checks` (the parent's reading of each reply: windows, kernels, the quiet check), `stopping_rule`, `take outputs`
    (every candidate batch's outputs read by the judge, gauntlet.judge.values.taken), `end`, and, from
    gauntlet.judge.timing.timed, `expected` (the shape's answer), `spot_checks` and `output_checks`. A shape's timed
    calls sum to a fraction of its wall time: these say where the rest goes. `end`, `spot_checks` and `output_checks`
    come after the card's turn alone (gauntlet.judge.timing.spots): the entry's `alone` span does not hold them."""

    def __init__(self):
        self.spent = defaultdict(float)

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[name] += time.perf_counter() - t0

    def record(self) -> dict:
        return {name: round(s, 4) for name, s in sorted(self.spent.items())}
