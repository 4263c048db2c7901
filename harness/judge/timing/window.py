"""Did every kernel of a timed call run inside its measured window? Judged in the parent from the profiler's GPU
timeline of the call (gauntlet.child.profiling: each GPU activity's start and end, on every stream).

The prime (gauntlet.gpu.prime) is launched and waited for before anything else is queued: it ends before the hold
starts, or it is not the harness's. The window: the harness's hold (gauntlet.gpu, a kernel that takes every SM of the
GPU) is queued on the caller's stream right before the start event, so the start event fires when the hold ends (or
when the host records it, if that is later: a host hiccup of a few ms between the two happens now and
then); the begin marker, an empty kernel on a stream of the harness's own that waits for the start event, starts
once it has fired and an SM is free (`_opened` works out where the start event fired when the call's kernels kept
every SM busy); the end event is followed on the same stream by the output's snapshot and the end marker, another
empty kernel. On the profiler's timeline the window therefore runs from where the start event fired to that plus the
time the events report, and never past the end marker's start. A kernel of the call (any stream, any thread, any
activity that is not the harness's own) that started before the window opened ran beside the hold or between the
hold and the start event, before the clock started; one that ended after the window closed was deferred past the end
event: either way the events under-report the call, and the call is `tampering`, with the kernel named and by how
much.

Slack: with the hold filling the GPU, a kernel on a stream not ordered after the caller's can start only as the
hold's blocks retire (the first such kernel starts within a microsecond before the hold's recorded end, the begin
marker a few microseconds after it), and the events and the profiler's timestamps agree to about a microsecond. So
START_SLACK_US and END_SLACK_US are small, and what a call can run outside its window within them is bounded by
them. The window's end is the start plus the events' time, and the two clocks also differ in rate, by about 1e-4:
a long call can end tens of microseconds after it on the profiler's clock although its one kernel ran on the
caller's stream, before the end event (docs/benchmarks.md). So the end also allows CLOCK_RATE_SLACK of the call's
time: work deferred that way gains the call at most 0.05% of its time, and never past the end marker's start (plus
END_SLACK_US), which is on the profiler's own clock. Both sides are checked alike: a baseline call outside its own
window is a harness bug (gauntlet.judge.timing.bench raises).
"""
from __future__ import annotations

import math

from ..process.kernels import HARNESS_KERNELS

START_SLACK_US = 10.0
END_SLACK_US = 10.0
CLOCK_RATE_SLACK = 5e-4  # of the call's time: the events' and the profiler's clocks disagree in rate (about 1e-4)
JOIN_US = 5.0           # kernels closer than this count as back to back (a launch's latency is not idle time)


class BadTimeline(ValueError):
    """The call's timeline does not have the shape the worker sends (a malformed reply)."""


def _spans(call: dict) -> list[tuple[float, float]]:
    kernels, spans = call.get("kernels"), call.get("spans")
    if not isinstance(kernels, list) or not isinstance(spans, list) or len(spans) != len(kernels):
        raise BadTimeline("'spans' must give one [start, end] per kernel")
    out = []
    for s in spans:
        if not (isinstance(s, list) and len(s) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                            and math.isfinite(x) for x in s) and s[0] <= s[1]):
            raise BadTimeline(f"span {s!r} is not [start ns, end ns]")
        out.append((float(s[0]), float(s[1])))
    return out


def check(call: dict, ms: float) -> tuple[list[str], dict]:
    """(problems, margins) of one timed call whose events reported `ms`. Problems name each kernel that ran outside
    the window (at most 4); margins (µs) are the least room any kernel of the call left at either end (negative:
    outside), for the record and for measuring the slack. BadTimeline when the timeline is malformed or the
    harness's own kernels are missing or doubled."""
    spans = _spans(call)
    names = [k[0] if isinstance(k, list) and k and isinstance(k[0], str) else "" for k in call["kernels"]]
    snaps = call.get("snaps", 0)
    if type(snaps) is not int or not 0 <= snaps <= 1:
        raise BadTimeline(f"'snaps' is {snaps!r}, not 0 or 1")
    found: dict = {}
    for i, name in enumerate(names):
        if name in HARNESS_KERNELS:
            found.setdefault(HARNESS_KERNELS[name], []).append(i)
    expected = {"prime": 1, "hold": 1, "begin": 1, "mark": 1, "snap": snaps}
    for kind, n in expected.items():
        if len(found.get(kind, [])) != n:
            raise BadTimeline(f"the call's timeline holds {len(found.get(kind, []))} of the harness's {kind} "
                              f"kernels, not {n} (a kernel named like the harness's, or the harness's missing)")
    hold_end = spans[found["hold"][0]][1]
    begun = spans[found["begin"][0]][0]
    mark_start = spans[found["mark"][0]][0]
    ours = {i for idx in found.values() for i in idx}
    opened = _opened(hold_end, begun, [s for i, s in enumerate(spans) if i not in ours])
    opened = _ordered_after_start(call, spans, found, ours, hold_end, opened)
    close = min(mark_start, opened + ms * 1e6)
    limit = min(mark_start, opened + ms * 1e6 * (1 + CLOCK_RATE_SLACK)) + END_SLACK_US * 1e3
    problems, early, late = [], math.inf, math.inf
    prime_end, hold_start = spans[found["prime"][0]][1], spans[found["hold"][0]][0]
    if prime_end > hold_start:       # the harness waits for its prime before it queues the hold
        problems.append(f"a kernel named like the harness's prime ran until {(prime_end - hold_start) / 1e3:.1f} us "
                        "after the hold began: not the harness's prime, which ends before the hold is queued")
    for i, (a, b) in enumerate(spans):
        if i in ours:
            continue
        before_us, after_us = (opened - a) / 1e3, (b - close) / 1e3
        early, late = min(early, -before_us), min(late, -after_us)
        if a < hold_end - START_SLACK_US * 1e3:
            problems.append(f"{names[i][:90]!r} started {(hold_end - a) / 1e3:.1f} us before the hold ended: it ran "
                            "beside the harness's hold, before the start event (outside the measured window)")
        elif before_us > START_SLACK_US:
            problems.append(f"{names[i][:90]!r} started {before_us:.1f} us before the start event: it ran before "
                            "the measured window opened")
        elif b > limit:
            problems.append(f"{names[i][:90]!r} ended {after_us:.1f} us after the end event: it ran past the "
                            "measured window")
    theirs = [s for i, s in enumerate(spans) if i not in ours]
    before, after = _idle_ends(opened, close, theirs)
    margins = {"idle_us": round(_idle(opened, close, theirs) / 1e3, 2),
               "busy_us": round(_busy(opened, close, theirs) / 1e3, 2),
               "idle_before_us": round(before / 1e3, 2), "idle_after_us": round(after / 1e3, 2),
               "start_us": None if early == math.inf else round(early, 2),
               "end_us": None if late == math.inf else round(late, 2),
               "marker_after_end_us": round((mark_start - opened) / 1e3 - ms * 1e3, 2),
               "start_after_hold_us": round((opened - hold_end) / 1e3, 2),
               "begin_after_start_us": round((begun - opened) / 1e3, 2)}
    return problems[:4], margins


def _opened(hold_end: float, begun: float, spans: list[tuple[float, float]]) -> float:
    """Where the start event fired, on the profiler's timeline: between the hold's end (it cannot fire earlier)
    and the begin marker's start (which runs once it has fired and an SM is free). A call's own kernels are launched
    after the host recorded the start event, so they never run before it fired: if the GPU was idle (no kernel of the
    call running, gaps under JOIN_US ignored) at some moment before the begin marker started, the start event had
    not fired yet (the begin marker would have run), and it fired at the last such moment. If the call's kernels
    covered the GPU from the hold's end until the begin marker started (the call's first kernel, or one on an
    unordered stream, took the SMs as the hold ended and the marker waited for one, for over a hundred us), it
    fired as the hold ended. The earliest time consistent
    with what ran: a late window would let deferred work through, an early one cannot hurt a call whose kernels
    were all launched from solve."""
    covered_from = None
    for a, b in sorted((max(a, hold_end), b) for a, b in spans if b > hold_end and a < begun):
        if covered_from is None or a > reach + JOIN_US * 1e3:
            covered_from = a
            reach = b
        else:
            reach = max(reach, b)
    if covered_from is None or reach < begun - JOIN_US * 1e3:
        return begun                                 # idle right before the marker: it ran as soon as it could
    return max(hold_end, covered_from) if covered_from > hold_end + JOIN_US * 1e3 else hold_end


def _ordered_after_start(call: dict, spans: list, found: dict, ours: set, hold_end: float, opened: float) -> float:
    """The window's opening, no later than the start of any kernel that stream order puts after the start event: one
    on the start event's own stream (the hold's) whose launch the host made after the begin marker's (the worker's
    `after_begin`, from the profiler's correlation ids: the begin marker is queued right after the start event is
    recorded). `_opened` alone relies on the begin marker starting as soon as the start event fires and an SM is
    free; it can start over 10 us late, after an idle moment, and an honest call's first kernel (on the caller's
    stream, queued after the start event) would then be named as running before the window opened. A kernel
    queued on that stream during the hold, before the start event was recorded (a thread of the candidate's), is not
    `after_begin` and is judged as before. Only where the hold and the begin marker ran on streams the profiler
    tells apart; a reply without these lists changes nothing."""
    streams, after = call.get("streams"), call.get("after_begin")
    if streams is None and after is None:
        return opened
    if not (isinstance(streams, list) and isinstance(after, list) and len(streams) == len(spans) == len(after)
            and all(type(x) is int for x in streams) and all(type(x) is bool for x in after)):
        raise BadTimeline("'streams' and 'after_begin' must give one integer and one boolean per kernel")
    hold_stream, begin_stream = streams[found["hold"][0]], streams[found["begin"][0]]
    if hold_stream == begin_stream:
        return opened
    starts = [spans[i][0] for i in range(len(spans)) if i not in ours and after[i] and streams[i] == hold_stream]
    return max(hold_end, min([opened] + starts))


def _covered(opened: float, close: float, spans: list[tuple[float, float]], join: float = 0.0) -> float:
    """How long (ns) the spans cover inside [opened, close], each counted once, a gap of at most `join` ns between
    two of them counted as covered."""
    covered, run_a, run_b = 0.0, None, None
    for a, b in sorted((max(a, opened), min(b, close)) for a, b in spans if b > opened and a < close):
        if run_b is None or a > run_b + join:
            if run_b is not None:
                covered += run_b - run_a
            run_a, run_b = a, b
        else:
            run_b = max(run_b, b)
    if run_b is not None:
        covered += run_b - run_a
    return covered


def _idle(opened: float, close: float, spans: list[tuple[float, float]]) -> float:
    """How long (ns) the GPU ran none of the call's work inside its window: waiting for the host to launch it.
    With the hold covering the launch, the call's kernels are queued when the window opens and this is a few
    launch latencies; a host slowed down past the hold (its own slow launch, or a host busy with other work) shows
    as idle time that the events count as the call's (gauntlet.judge.timing.bench: starved calls)."""
    return max(0.0, (close - opened) - _covered(opened, close, spans))


def _busy(opened: float, close: float, spans: list[tuple[float, float]]) -> float:
    """How long (ns) the call's kernels kept the GPU inside its window, a gap under JOIN_US between two of them
    counted as kept (a launch's latency: kernels queued back to back, as a CUDA graph replays them, still leave it).
    What the call costs the GPU with its host's waits taken out: the figure of a baseline that waits for the GPU
    (gauntlet.judge.timing.figures)."""
    return _covered(opened, close, spans, join=JOIN_US * 1e3)


def _idle_ends(opened: float, close: float, spans: list[tuple[float, float]]) -> tuple[float, float]:
    """Of a window's idle time (ns), how much came before the call's first kernel started (its launch reached the
    GPU late: the host was slow before or during the launch) and after its last kernel ended (the end event was
    recorded late: the host was slow after the launch, before solve returned). The rest lies between kernels."""
    inside = [(max(a, opened), min(b, close)) for a, b in spans if b > opened and a < close]
    if not inside:
        return max(0.0, close - opened), 0.0
    return max(0.0, min(a for a, _ in inside) - opened), max(0.0, close - max(b for _, b in inside))


def batch_problems(header: dict) -> tuple[list[tuple[int, str]], list[dict]]:
    """([(call index, first problem)] of every call of a (validated) batch reply whose kernels ran outside its
    window, [margins of each call])."""
    out, margins = [], []
    for i, (call, ms) in enumerate(zip(header["calls"], header["ms"])):
        problems, m = check(call, ms)
        margins.append(m)
        if problems:
            out.append((i, problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")))
    return out, margins


def least_margins(margins: list[dict]) -> dict:
    """The least room left at each end of the window over many calls (µs; None where no call had a kernel), and the
    largest gap between the events' end and the end marker's start."""
    def least(key):
        xs = [m[key] for m in margins if m.get(key) is not None]
        return min(xs) if xs else None
    gaps = [m["marker_after_end_us"] for m in margins if m.get("marker_after_end_us") is not None]
    return {"start": least("start_us"), "end": least("end_us"), "marker_gap_max": max(gaps) if gaps else None}
