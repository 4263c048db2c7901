"""The timed-call loop, run by both workers (the candidate's and the clean baseline worker) in the same way.

One timed call:
  refill its input set in place from a fresh seed -> reset persisting L2 -> flush L2 (timed: the quiet check)
  -> device-wide sync -> queue a spin kernel that holds the stream for `hold_ms` -> start event -> solve(*inputs)
  -> end event -> device-wide sync.
The spin kernel keeps the GPU busy while the host launches the call, so the events time the GPU work and not the
host's launch latency (Triton's Python launcher costs more than cuBLAS's); the host time of the launch is measured
apart and reported as its own figure. The same method at every size: no threshold for a shape to straddle.

Every call runs inside the profiler (harness.child.profiling), so the parent sees which kernels each timed call
ran. Every output of a batch stays alive until the batch ends, on both sides (so the allocator behaves the same);
the candidate's are kept until the next request so the parent can choose, after the fact, which ones to check
(`spot`); then they are poisoned and freed.
"""
from __future__ import annotations

import contextlib
import random
import statistics
import time

import torch

from harness.child import guard
from harness.child.profiling import CallProfiler
from harness.gpu import HOLD_MIN_MS, Flusher, hold


class Bench:
    """One side's timing of one (shape, dtype): its input sets, its function, the outputs of its last batch."""

    def __init__(self, fn, make_set, sets: list | None = None, n_sets: int = 3):
        self.fn, self.make_set = fn, make_set
        self.rng = random.SystemRandom()          # not reproducible on purpose: the candidate cannot predict it
        self.sets = sets if sets is not None else [make_set(self.rng.randrange(2**31)) for _ in range(n_sets)]
        self.flush = Flusher(next(x.device for x in self.sets[0] if isinstance(x, torch.Tensor)))
        self.kept: list = []

    def refill(self, k: int) -> int:
        seed = self.rng.randrange(2**31)
        for dst, src in zip(self.sets[k], self.make_set(seed)):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        return seed

    def warm(self) -> dict:
        """Compilation, caches, handles: a varying number of untimed calls. Returns the probe: the median GPU
        time and host launch time of three held calls."""
        for _ in range(self.rng.randint(1, 3)):
            for args in self.sets:
                guard.poison(self.fn(*args))
        torch.cuda.synchronize()
        probe = self.batch(3, hold_ms=HOLD_MIN_MS * 4, keep=False)
        return {"probe_ms": statistics.median(probe["ms"]), "host_ms": max(probe["host_ms"])}

    def batch(self, calls: int, hold_ms: float, keep: bool, device: str = "cuda", profile: bool = True) -> dict:
        """`calls` timed calls, each in a profiler session of its own. Keeps the outputs (for spot checks) when
        asked. `profile=False` is for measuring the profiler's own effect (scripts/timing_probe.py), never used by
        the worker."""
        self.release()
        ms, host, flush_ms, seeds, outs, seen = [], [], [], [], [], []
        for _ in range(calls):
            k = self.rng.randrange(len(self.sets))
            seeds.append(self.refill(k))
            guard.reset_persisting_l2()
            f0, f1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            f0.record()
            self.flush()
            f1.record()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with (CallProfiler(device) if profile else contextlib.nullcontext()) as prof:
                hold(hold_ms)
                start.record()
                t0 = time.perf_counter()
                out = self.fn(*self.sets[k])
                host.append((time.perf_counter() - t0) * 1e3)
                end.record()
                torch.cuda.synchronize()
            seen.append(prof.observed() if profile else {})
            ms.append(start.elapsed_time(end))
            flush_ms.append(f0.elapsed_time(f1))
            outs.append(out)          # kept on both sides alike (the allocator then behaves the same for both)
            del out
        shared = shared_outputs(outs)
        self.kept = list(zip(seeds, outs)) if keep else []
        if not keep:
            for out in outs:
                guard.poison(out)
        return {"ms": ms, "host_ms": host, "flush_ms": flush_ms, "calls": seen, "shared_outputs": shared}

    def spot(self, index: int):
        """(seed, output) of call `index` of the last batch."""
        return self.kept[index]

    def release(self) -> None:
        for _, out in self.kept:
            guard.poison(out)
        self.kept = []


def shared_outputs(outs: list) -> int:
    """How many outputs of a batch use memory an earlier output of the same batch (all still alive) also uses: a
    candidate returning one module-level buffer every call. The same contract as the correctness calls' retention
    check, here over calls the candidate cannot tell from those."""
    earlier, shared = [], 0
    for out in outs:
        if type(out) is not torch.Tensor or out.numel() == 0:   # noqa: E721
            continue
        if guard.aliased_input(out, tuple(earlier)):      # the same storage-overlap test as output vs inputs
            shared += 1
        earlier.append(out)
    return shared
