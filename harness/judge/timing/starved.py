"""Starved calls: a timed call during which the GPU sat idle, waiting for the host to queue the call's work after
the hold ran out. The rule that says when a call was starved, and how far a side's starved calls moved the figure
it reports (gauntlet.judge.timing.timed times a shape again on a quiet host on that shift)."""
from __future__ import annotations

from . import scoring

# A timed call is starved when the GPU sat idle inside its window, waiting for the host to launch the call's work, for
# longer than this (gauntlet.judge.timing.window: idle_us): the hold had run out before the launch was queued. A host
# busy with other judges can double a fast call's launch and slow its median call, and so move a speedup far from
# what the same kernel reads with the host quiet (docs/benchmarks.md).
STARVE_US, STARVE_SHARE = 10.0, 0.03     # µs, plus this share of the call's own time


def starved_call(margin: dict, ms: float) -> bool:
    idle = margin.get("idle_us") if isinstance(margin, dict) else None
    return idle is not None and idle > STARVE_US + STARVE_SHARE * ms * 1e3


def _calls(rounds: list[dict]):
    """Each timed call of a side's rounds: (its window's margins, or None in a round without windows (the CPU),
    its ms)."""
    for r in rounds:
        yield from zip(r.get("window") or [None] * len(r["ms"]), r["ms"])


def starved_flags(rounds: list[dict]) -> list[tuple[float, bool]]:
    """Each timed call of a side's rounds: (its ms, whether it was starved); a round without windows (the CPU) has
    none starved."""
    return [(x, starved_call(m, x)) for m, x in _calls(rounds)]


def starved_shift(rounds: list[dict]) -> float | None:
    """How far a side's starved calls moved the figure it reports: median(every call) / median(the calls not
    starved) - 1; None where half or more of its calls were starved (the median is then a starved call itself).

    A count alone says too little: on a quiet host a batch's first call is often starved (up to one per batch), and
    that moves a tight side's median by a small fraction of a percent, while a busy host can starve most of a fast
    kernel's calls and move its median by tens of percent (docs/benchmarks.md).
    gauntlet.judge.timing.timed times a shape again with the host alone on the shift, not on the count."""
    flags = starved_flags(rounds)
    calm = [x for x, starved in flags if not starved]
    if not flags:
        return 0.0
    if 2 * len(calm) <= len(flags):
        return None
    return scoring.median([x for x, _ in flags]) / scoring.median(calm) - 1.0


def starved_where(rounds: list[dict]) -> dict:
    """Where each starved call's idle time mostly lay (gauntlet.judge.timing.window: _idle_ends): `before` its first
    kernel (the launch reached the GPU after the hold ran out), `after` its last kernel (solve returned, and the end
    event was recorded, after the work had finished), or `between` its kernels (the host was slow between launches).
    So a record says which host delay set a starved figure (a figure can move between runs with its starved calls
    alone), without another run."""
    out = {"before": 0, "between": 0, "after": 0}
    for m, x in _calls(rounds):
        if not starved_call(m, x) or m.get("idle_before_us") is None:
            continue
        before, after = m["idle_before_us"], m.get("idle_after_us") or 0.0
        parts = {"before": before, "after": after, "between": max(0.0, m["idle_us"] - before - after)}
        out[max(parts, key=parts.get)] += 1
    return out
