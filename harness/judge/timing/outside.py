"""The outside clock: how long a side's calls take on the GPU, timed by the parent's own clock, which no reply can
shorten (gauntlet.judge.timing.bench runs it after the rounds; gauntlet.judge.timing.spots judges its proofs).

What it guards: the rounds' figure is what each worker's events report, and the profiler's timeline that bounds the
measured window comes from the same process. A candidate that rewrites both in its own process (times scaled down,
the timeline squeezed to match) passes every in-process check; the second clock (figures.second_clock) sees each
batch from outside too, but each timed call also costs the host milliseconds of refill, flush, hold, profiler
session and syncs, noisy enough to hide a lie of tens of microseconds a call.

So each side also runs spans (gauntlet.child.timing.Bench.span): n calls queued back to back behind ONE hold sized
to cover the host's launches of all of them, the same L2 flush before each call as a timed call, no profiler, one
device-wide sync at the end. The parent times each span from send to reply. For two sizes n1 < n2 (one hold), the
slope (T(n2) - T(n1)) / (n2 - n1) is the GPU time of a call plus its flush: the fixed costs (request, hold, sync,
reply) cancel. n2 - n1 gives SPAN_TARGET_MS of GPU time (at most SPAN_MAX_CALLS calls), each size runs SPAN_REPEATS
times, interleaved with the baseline's, and the slope is the lower of those between each size's fastest spans (the
host only adds time: `fit`) and its median spans (`gpu_ms`). The baseline (the clean worker) is measured the same
way: its slope less its reported time is this method's offset on this card (the flush, the gaps between kernels),
and the candidate's reported time must not fall below its own slope less that offset by more than the tolerance
(`bound`): otherwise `tampering`.

A reply cannot buy time either way:
- too early (before the GPU has done the work): each reply names PICKS elements of the span's last output (made
  from inputs the parent seeded in the request; the elements at positions the parent chose), read after the sync.
  The parent then fetches the whole output (untimed), finds those bytes in it, and judges it as it judges a timed
  call's output. The reply itself stays small, so a large output adds no transfer, and no noise, to the time;
- too late on the short span (a delay there flattens the slope): a span's time less the hold and the baseline's own
  fixed cost (its intercept, plus INTERCEPT_SLACK_MS), divided by n2, is a second estimate a delay only raises; the
  larger of the two is the outside figure.
What remains out of reach: a worker that skips or reorders calls inside a span (only the checked last call run, or
the named elements computed apart), or overlaps the calls across streams, so that n calls take less GPU time than n
timed calls do; one that skips the flush between calls; a delay on the short spans within INTERCEPT_SLACK_MS
(INTERCEPT_SLACK_MS / n2 a call). Each needs the span's loop or reply rewritten in the
candidate's process, which the tamper watch sees first but cannot prove; the figure a span gives is then a floor
the candidate chose, not the GPU's. A hold that the host's launches outlast (at SPAN_HOLD_CAP_MS) counts the
launches as the candidate's time, as the rounds do. A candidate whose calls wait for the GPU (a host sync inside)
shows the host's gaps between its calls in the slope, not in its events: the tolerance covers a few microseconds
a call of that.
"""
from __future__ import annotations

import math
import statistics

from ..process import replies
from ..process.isolate import ChildFailed
from ... import protocol
from ...reasons import Reason

SPAN_TARGET_MS = 20.0         # GPU time by which the two span sizes differ
SPAN_MAX_CALLS = 256          # the longest span (a short call then gives a smaller difference, noisier)
SPAN_MIN_DIFF = 8             # n2 - n1, at least
SPAN_REPEATS = 3
# Before the first measurement, one span of each size per side that the fit never sees. A side's first spans after
# the rounds are unlike its later ones: the first much slower, the next one can be faster than any later span of its
# size; kept, it set the fastest spans' slope and (before the medians counted: `gpu_ms`) ruled an honest CuTe DSL
# GEMM at decode `tampering` (docs/benchmarks.md, "The outside clock's first spans"). It costs a hold and calls.
WARMUP = True
# The span's hold: it must outlast the host's launches of all n2 calls (the flush's launch and the loop add about
# LAUNCH_EXTRA_MS to each call's own launch), with HOLD_MARGIN of room; between SPAN_HOLD_MIN_MS and
# SPAN_HOLD_CAP_MS. A span that reports the hold ran out first is run again with the side's holds twice as long
# (the report can only lengthen the hold: a false one costs time, never the bound); each span's time is taken less
# its own hold, which the GPU's timer makes exact.
SPAN_HOLD_MIN_MS, SPAN_HOLD_CAP_MS, LAUNCH_EXTRA_MS, HOLD_MARGIN = 2.0, 100.0, 0.03, 1.5
HOLD_TRIES = 3
# The bound: the candidate's reported ms a call may fall below its outside figure (less the baseline's offset) by
# SLACK_MS + SLACK_FRACTION of the figure, plus the spread of the slopes (at most SPREAD_CAP of the figure more).
# In a busy suite the candidate's and the baseline's spans run at different moments while other judges load the host,
# and a single measurement of an honest candidate can stray well past SLACK_FRACTION (docs/benchmarks.md, "The
# outside clock"). That noise shrinks as spans are added: a figure the bound would rule is measured AGAIN more times
# before it is ruled, all spans counting (`gpu_ms`). An honest figure settles back; a lie stays out.
SLACK_MS, SLACK_FRACTION, SPREAD_CAP = 0.004, 0.10, 0.05
AGAIN = 2
OFFSET_EXTRA_MS = 0.02        # the most the gaps between a span's kernels add to its flush, a call (`limits`)
# How far a candidate's fixed cost per span may exceed the baseline's: the judge's own per-request work for a
# candidate's worker (its /proc reads of tasks and descriptors, stopping and waking the baseline) costs several ms a
# span that the baseline's requests do not, so a tighter allowance counted that work as the candidate's GPU time.
INTERCEPT_SLACK_MS = 12.0
PICKS = 16                    # elements of a span's last output its reply names (Bench.span)
# Which shapes are measured: a judgement's first timed shape always (a candidate that lies on every call is caught
# there), each later one of the same worker with chance LATER_SHAPES, drawn after its rounds, so a candidate cannot
# tell which. The spans hold the card alone, about a second a shape: every shape of every dtype cost the suite more
# card time than the check is worth (docs/benchmarks.md, "The outside clock").
LATER_SHAPES = 0.25


def sizes(per_call_ms: float, host_ms: float) -> tuple[int, int]:
    """(n1, n2): n2 - n1 calls of `per_call_ms` (call and flush) add SPAN_TARGET_MS; n2 is capped so that the
    host's launches (`host_ms` a call) fit in the longest hold."""
    diff = max(SPAN_MIN_DIFF, math.ceil(SPAN_TARGET_MS / max(per_call_ms, 1e-3)))
    n1 = max(2, diff // 4)
    fit = int((SPAN_HOLD_CAP_MS - SPAN_HOLD_MIN_MS) / (HOLD_MARGIN * (host_ms + LAUNCH_EXTRA_MS)))
    n2 = min(n1 + diff, SPAN_MAX_CALLS, max(n1 + SPAN_MIN_DIFF, fit))
    return n1, n2


def span_hold(n2: int, host_ms: float, per_call_ms: float) -> float:
    """A hold that outlasts the host's launches of n2 calls, less what the GPU runs meanwhile (half its calls'
    time: the launches keep ahead of a GPU busy with calls longer than they are)."""
    ahead = n2 * max(0.0, HOLD_MARGIN * (host_ms + LAUNCH_EXTRA_MS) - 0.5 * per_call_ms)
    return min(SPAN_HOLD_CAP_MS, SPAN_HOLD_MIN_MS + ahead)


def fit(spans: list[dict]) -> dict:
    """A side's spans ({"n", "wall_ms", "hold_ms", "repeat"}) -> {"slope_ms", "median_slope_ms", "fixed_ms",
    "long_ms", "spread_ms", "n1", "n2"}. The host only ever adds to a span's time (a wake-up, a page fault, a
    collection): each size's fastest span (less its hold) is its time, `long_ms` the long one's; the slope is between
    the two, `fixed_ms` what the long one took beyond n2 slopes; `median_slope_ms` between each size's median span.
    `spread_ms`: how far single repeats' slopes stray (median absolute deviation), the noise the bound allows for."""
    best, times, by_repeat = {}, {}, {}
    for s in spans:
        t = s["wall_ms"] - s["hold_ms"]
        best[s["n"]] = min(t, best.get(s["n"], t))
        times.setdefault(s["n"], []).append(t)
        by_repeat.setdefault(s["repeat"], {})[s["n"]] = t
    if len(best) != 2:
        raise ValueError(f"spans of two sizes are needed, not {sorted(best)}")
    (n1, t1), (n2, t2) = sorted(best.items())
    slope = (t2 - t1) / (n2 - n1)
    singles = [(r[n2] - r[n1]) / (n2 - n1) for r in by_repeat.values() if len(r) == 2]
    return {"slope_ms": slope, "fixed_ms": t2 - n2 * slope, "long_ms": t2, "n1": n1, "n2": n2,
            "median_slope_ms": (statistics.median(times[n2]) - statistics.median(times[n1])) / (n2 - n1),
            "spread_ms": statistics.median([abs(x - slope) for x in singles]) if singles else 0.0}


def gpu_ms(side: dict) -> float:
    """A side's call and flush: the lower of the fastest and the median spans' slopes. A few ms the host added to all
    spans but one short one set the first too high and ruled an honest decode GEMM `tampering` (docs/benchmarks.md,
    2026-11-29, 13:00 UTC). A reply lowers either only by delaying short spans, which `outside_ms` bounds alike."""
    return min(side["slope_ms"], side["median_slope_ms"])


def outside_ms(cand: dict, base: dict) -> float:
    """The candidate's GPU time a call plus its flush, seen from outside: the larger of its slope (`gpu_ms`) and its
    long spans' time less the baseline's fixed cost (and INTERCEPT_SLACK_MS), a call's share (a delayed reply on the
    short spans lowers the first, and only raises the second)."""
    return max(gpu_ms(cand), (cand["long_ms"] - base["fixed_ms"] - INTERCEPT_SLACK_MS) / cand["n2"])


def limits(cand: dict, base: dict, base_ms: float, flush_ms: float) -> tuple[float, float, float]:
    """(seen, allowed, offset) in ms a call: what the outside clock saw of the candidate's call (`outside_ms` less the
    method's offset on this card), and the least reported time the bound allows (the tolerance: SLACK_MS,
    SLACK_FRACTION of the figure, and twice the slopes' spread, at most SPREAD_CAP more). The offset is the
    baseline's slope (`gpu_ms`) less its own reported `base_ms`: the flush before each call and the gaps between
    kernels; kept between half the flush's time (`flush_ms`, the baseline's own events) and the flush plus
    OFFSET_EXTRA_MS, so that a noisy baseline slope moves the bound no further than the physics allows."""
    offset = min(max(gpu_ms(base) - base_ms, 0.5 * flush_ms), flush_ms + OFFSET_EXTRA_MS)
    seen = outside_ms(cand, base) - offset
    spread = min(SPREAD_CAP * seen, 2 * max(cand["spread_ms"], base["spread_ms"]))
    return seen, seen - SLACK_MS - SLACK_FRACTION * seen - spread, offset


def bound(cand: dict, base: dict, cand_ms: float, base_ms: float, flush_ms: float, label: str) -> list[Reason]:
    """`tampering` where the candidate's reported ms a call (`cand_ms`, the rounds' median) is below what the
    outside clock allows (`limits`)."""
    seen, allowed, offset = limits(cand, base, base_ms, flush_ms)
    if cand_ms >= allowed:
        return []
    return [Reason("tampering", f"the candidate's events report {cand_ms:.4f} ms a call; the judge's own clock saw "
                                f"{seen:.4f} ms a call (spans of {cand['n1']} and {cand['n2']} calls queued back "
                                f"to back, timed from outside the process, less {offset:.4f} ms a call of flush "
                                f"and launch gaps, as baseline {label!r} showed): the reported times are "
                                f"{1 - cand_ms / seen:.0%} below what the GPU ran, more than the "
                                f"{1 - allowed / seen:.1%} the method allows")]


def run(schedule, baselines: list[str]) -> None:
    """After the rounds: the spans of the candidate and of the first baseline whose calls do not wait for the GPU (a
    call that syncs inside cannot be queued behind a hold), in `schedule.outside` with the record's summary; where
    there is none (or no GPU), the summary says why. A malformed candidate reply is the schedule's reason."""
    label = next((b for b in baselines if b not in schedule.waits and b in schedule.samples), None)
    if schedule.cand.device != "cuda" or label is None or "candidate" not in schedule.samples or schedule.reasons:
        schedule.outside = {"summary": {"skipped": "no GPU" if schedule.cand.device != "cuda" else
                                        "no baseline whose calls can be queued behind a hold"}}
        return
    if getattr(schedule.cand, "outside_clocked", False) and schedule.rng.random() >= LATER_SHAPES:
        schedule.outside = {"summary": {"skipped": f"not drawn: a judgement's first timed shape is measured, "
                                                   f"a later one with chance {LATER_SHAPES:g}"}}
        return
    schedule.cand.outside_clocked = True
    with schedule.phases("outside_clock"):
        try:
            found = measure(schedule, label)
            for again in range(1, AGAIN + 1):
                if not suspect(schedule, found, label):
                    break
                more = measure(schedule, label, first_repeat=again * SPAN_REPEATS)
                for key in ("candidate", label, "proofs"):
                    found[key] += more[key]
                found["again"] = again
        except SpanRejected as exc:
            schedule.reasons.append(exc.reason)
            return
    schedule.outside = dict(found, label=label, summary=summary(found, label))


def suspect(schedule, found: dict, label: str) -> bool:
    """Whether the spans so far put the candidate's reported time below the bound (`limits`)."""
    figs = schedule.figures()
    _, allowed, _ = limits(fit(found["candidate"]), fit(found[label]), figs[label]["ms"], found["flush_ms"])
    return figs["candidate"]["ms"] < allowed


def judge(schedule, figs: dict) -> list[Reason]:
    """The bound (`bound`) on the record's figures where the spans were run; the summary gets what the clock saw."""
    found = schedule.outside
    label = found.get("label")
    if not label or label not in figs:
        return []
    cand, base, flush = fit(found["candidate"]), fit(found[label]), found["flush_ms"]
    seen, allowed, offset = limits(cand, base, figs[label]["ms"], flush)
    found["summary"].update(seen_ms=round(seen, 5), allowed_ms=round(allowed, 5), offset_ms=round(offset, 5))
    return bound(cand, base, figs["candidate"]["ms"], figs[label]["ms"], flush, label)


def measure(schedule, label: str, first_repeat: int = 0) -> dict:
    """Run the spans of the candidate and baseline `label` (SPAN_REPEATS of each size, interleaved, every other worker
    stopped; repeats numbered from `first_repeat`). The sizes follow from the rounds' figures alone, so a measurement
    taken again has the same two. A span whose hold ran out is run again with the side's holds twice as long, up to
    the cap (the longer holds kept after it). The first measurement starts with one span of each size per side that
    the fit never sees (`WARMUP`). Returns {"candidate": spans, label: spans, "warmup": discarded spans, "proofs":
    [(index, header, blobs) of the candidate's long spans' outputs, judged like timed outputs]}."""
    figs = schedule.figures()
    flush = statistics.median(x for r in schedule.samples[label] for x in r["flush_ms"])
    per_call = min(figs["candidate"]["ms"], figs[label]["ms"]) + flush
    n1, n2 = sizes(per_call, max(figs["candidate"]["host_ms"], figs[label]["host_ms"]))
    grow = {"candidate": 1.0, label: 1.0}
    found: dict = {"candidate": [], label: [], "proofs": [], "flush_ms": flush, "warmup": {"candidate": [], label: []}}

    def held_span(side, n, r):
        for _ in range(HOLD_TRIES):
            hold = min(SPAN_HOLD_CAP_MS, grow[side] * span_hold(n, figs[side]["host_ms"], per_call))
            span = _span(schedule, side, n, hold, r)
            if not span["starved"] or hold >= SPAN_HOLD_CAP_MS:
                return span
            grow[side] *= 2
        return span

    if first_repeat == 0 and WARMUP:
        for side in ("candidate", label):
            for n in (n1, n2):
                found["warmup"][side].append(held_span(side, n, -1))
    for r in range(first_repeat, first_repeat + SPAN_REPEATS):
        order = [(side, n) for side in ("candidate", label) for n in (n1, n2)]
        schedule.rng.shuffle(order)
        for side, n in order:
            span = held_span(side, n, r)
            found[side].append(span)
            if side == "candidate" and n == n2:
                found["proofs"].append(_proof(schedule, span))
    return found


def _span(schedule, side: str, n: int, hold_ms: float, repeat: int) -> dict:
    """One span, timed from before the request is sent until its (small) reply is read."""
    child, other = (schedule.cand, schedule.base) if side == "candidate" else (schedule.base, schedule.cand)
    request = {"op": "bench_span", "side": side, "calls": n, "hold_ms": hold_ms,
               "seed": schedule.rng.randrange(2**31), "picks": [schedule.rng.randrange(2**31) for _ in range(PICKS)]}
    other.stop()
    # The time is the worker's alone, from the request written to the reply read (Child.request's clock); the check
    # midway falls within the first half of the hold, when no reply can be on its way yet.
    clock = {"midway_s": 0.5 * hold_ms / 1e3}
    header, blobs = child.request(request, timeout=schedule.timeout, what=f"timing {side} (outside clock)",
                                  clock=clock)
    wall = (clock["replied"] - clock["sent"]) * 1e3
    _check_ok(schedule, child, header)
    picked = header.get("picked")
    if not (type(header.get("starved")) is bool and header.get("seed") == request["seed"] and not blobs
            and (picked is None or (isinstance(picked, str) and len(picked) <= 64 * PICKS))):
        raise SpanRejected(schedule._bad_reply(child, replies.BadReply(
            "a span's reply must echo its seed, say whether the hold ran out, and carry the picked elements")))
    return {"n": n, "wall_ms": wall, "hold_ms": hold_ms, "repeat": repeat, "starved": header["starved"],
            "picks": request["picks"], "picked": picked, "seed": request["seed"]}


def _proof(schedule, span: dict):
    """The candidate's span's last output, fetched after the span (untimed): it must be the one the reply named
    (its picked elements, byte for byte), and it is judged later like a timed call's output (`spots`)."""
    cand = schedule.cand
    schedule.base.stop()
    header, blobs = cand.request({"op": "bench_span_output", "side": "candidate"}, timeout=schedule.timeout,
                                 what="returning a span's last output", max_blob=schedule.request["max_blob"],
                                 device=cand.device)
    _check_ok(schedule, cand, header)
    try:
        replies.spot(header, len(blobs))
        if header["seed"] != span["seed"]:
            raise replies.BadReply(f"the span's output is seed {header['seed']}'s, not {span['seed']}'s")
    except replies.BadReply as exc:
        raise SpanRejected(schedule._bad_reply(cand, exc)) from None
    found = protocol.picked(protocol.tensor_from_wire(header["wire"], blobs[0])
                   if header["meta"]["is_tensor"] else None, span["picks"])
    if found != span["picked"]:
        raise SpanRejected(Reason("tampering", "a span's reply named output values that its output, fetched "
                                               "afterwards, does not hold (a reply sent before the GPU had done the "
                                               "work, and the output finished later?)"))
    span.pop("picks"), span.pop("picked")
    return span["n"] - 1, header, blobs


def _check_ok(schedule, child, header: dict) -> None:
    if header.get("ok"):
        return
    if child is schedule.base:
        raise RuntimeError(f"the baseline worker failed a span: {str(header.get('detail'))[:2000]}")
    raise ChildFailed(Reason("crash", f"while timing (outside clock): {str(header.get('detail'))[:3000]}"))


class SpanRejected(Exception):
    def __init__(self, reason: Reason):
        super().__init__(reason.detail)
        self.reason = reason


def summary(found: dict, label: str) -> dict:
    """What the record keeps of the outside clock: how many times the spans were measured (`AGAIN`), each side's
    fit (ms), the spans' holds, and each span as [n, its time less its hold] in the order run."""
    out = {"baseline": label, "measured": 1 + found.get("again", 0)}

    def times(spans):
        return [[s["n"], round(s["wall_ms"] - s["hold_ms"], 3)] for s in spans]

    for side in ("candidate", label):
        f = fit(found[side])
        out[side if side == "candidate" else "base"] = {
            **{k: round(f[k], 5) for k in ("slope_ms", "median_slope_ms", "spread_ms")},
            "fixed_ms": round(f["fixed_ms"], 3), "long_ms": round(f["long_ms"], 3), "n": [f["n1"], f["n2"]],
            "hold_ms": round(max(s["hold_ms"] for s in found[side]), 3),
            "starved_spans": sum(s["starved"] for s in found[side]),
            "spans": times(found[side]), "warmup": times(found.get("warmup", {}).get(side, []))}
    return out
