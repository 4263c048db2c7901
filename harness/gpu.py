"""GPU timing primitives both sides use: the L2 flush and the stream hold. Pure mechanism, no judgement.

The hold (a spin kernel queued before the start event, as tritonbench's gpu-events mode does) keeps the host's
launch latency out of the event time: the call's kernels are queued behind the spin and start the moment it ends.
"""
from __future__ import annotations

import os
import statistics

import torch

HOLD_MIN_MS = 1.0


def judges_per_gpu() -> int:
    """GAUNTLET_JUDGES_PER_GPU: how many judges share this GPU (default 1). ValueError when it is not a positive
    integer. Read by the judge (memory share: harness.judge.memory) and by the worker at start-up (how long a
    time-sliced sync may take: harness.child.worker)."""
    raw = os.environ.get("GAUNTLET_JUDGES_PER_GPU", "1")
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"GAUNTLET_JUDGES_PER_GPU must be a positive integer, got {raw!r}")
    return value


class Flusher:
    """Writes over a buffer twice the L2 size: what the previous call left in L2 is evicted."""

    def __init__(self, device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def __call__(self):
        self.buf.zero_()


_CYCLES_PER_MS: list[float] = []


def cycles_per_ms() -> float:
    """Clock cycles of torch.cuda._sleep per millisecond on this GPU, measured once per process."""
    if not _CYCLES_PER_MS:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 1 << 20
        torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        _CYCLES_PER_MS.append(cycles / max(start.elapsed_time(end), 1e-3))
    return _CYCLES_PER_MS[0]


def hold(ms: float) -> None:
    torch.cuda._sleep(int(ms * cycles_per_ms()))


def held_ms(fn, flush: Flusher, n: int = 5, hold_ms: float = HOLD_MIN_MS, stat=statistics.median) -> float:
    """GPU time of fn() over n held, flushed calls, summarised by `stat` (the median; the trusted parent takes the
    minimum for its ceilings: other work on the GPU only ever slows a call down)."""
    times = []
    for _ in range(n):
        flush()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        hold(hold_ms)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return stat(times)
