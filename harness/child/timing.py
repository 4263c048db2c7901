"""The timed-call loop, run by both workers (the candidate's and the clean baseline worker) in the same way.

One timed call:
  refill its input set in place from a fresh seed -> reset persisting L2 -> flush L2 (timed: the quiet check)
  -> device-wide sync -> [profiler session: the prime (launched and waited for) -> the hold (every SM of the GPU,
  `hold_ms`, set by the judge) -> start event -> begin marker -> solve(*inputs) -> end event -> snapshot of the
  output -> end marker -> device-wide sync].
The hold keeps the whole GPU busy while the host launches the call (gauntlet.gpu), so the events time the GPU work
and not the host's launch latency (Triton's Python launcher costs more than cuBLAS's), and nothing the call
launches on another stream can run beside it; the host time of the launch is measured apart and reported as its
own figure (a launch longer than the hold shows in the GPU time: the hold is the judge's, not the candidate's). The
same method at every size: no threshold for a shape to straddle. Correctness calls (gauntlet.child.worker run_case)
go through the same `held_call`, with their inputs' version counters settled the same way (`settle`), so a
candidate cannot tell the two apart by the stream, the hold or its inputs' counters.

Every call runs inside the profiler (gauntlet.child.profiling), so the parent sees which kernels each timed call ran,
and when: the hold and the end marker bound the window, and a kernel outside it is `tampering`
(gauntlet.judge.timing.window). Every output of a batch stays alive until the batch ends, on both sides (so the
allocator behaves the same); then it is poisoned and freed. What the parent may check is the output's snapshot, copied
on the caller's stream right after the end event (gauntlet.gpu.snapshot): work that completes an output later (from a
thread, a signal handler, the next request) cannot change it. At the batch's end the candidate's snapshots are written
into a buffer the judge maps through CUDA IPC (gauntlet.handoff: slot k), which the judge reads right after the reply,
before the worker runs again: every output is checked, and no later request says which (gauntlet.judge.values.taken).
Where there is no such buffer, they go in the reply.
"""
from __future__ import annotations

import contextlib
import random
import statistics
import time

import torch

from . import guard
from .profiling import CallProfiler
from ..gpu import HOLD_MIN_MS, Flusher, begin, hold, mark, prime, snapshot
from ..protocol import picked

# A warm-up pass whose last call took this long ends the warm-up: its compiling is done (the pass's first call did
# it), and each further pass only costs the card (a naive kernel at the largest shapes takes seconds a call).
WARM_SLOW_MS = 100.0
PROBE_HOLD_MS = HOLD_MIN_MS * 4    # the hold of the three probe calls every side's warm-up ends with
# The second probe's hold (`warm`: a call that waits for the GPU): this much past 1.5 times the longest launch seen,
# at most the cap (a launch that long is timed as it is).
WAIT_PROBE_MS, WAIT_PROBE_CAP_MS = 10.0, 200.0

# Every input's version counter when a call starts, correctness and timed alike: refilled in place, a timed set's
# counter would otherwise grow with every call and tell timed calls from fuzzed ones.
INPUT_VERSION = 2


def settle(inputs) -> None:
    """Set every tensor input's version counter to INPUT_VERSION (views share their base's counter)."""
    tensors = [x for x in inputs if type(x) is torch.Tensor]      # noqa: E721
    if not tensors:
        return
    setter = torch._C._autograd._unsafe_set_version_counter
    try:
        setter(tuple(tensors), tuple(INPUT_VERSION for _ in tensors))
    except TypeError:            # an older torch: one tensor at a time
        for t in tensors:
            setter(t, INPUT_VERSION)
    except RuntimeError:         # inference tensors keep no counter
        pass


def held_call(fn, args, hold_ms: float, started: list | None = None):
    """One call on the GPU, the way every call is run (inside the caller's profiler session): the prime, waited for
    (gauntlet.gpu.prime: the session's first launch costs the host far more than the next, and must not eat into
    the hold), then the hold, the start event, fn(*args), the end event, the output's snapshot and the end marker,
    queued on the current stream, and the begin marker on the harness's own stream, after the start event
    (gauntlet.gpu.begin). Nothing after the prime is waited for. Returns (out, snapshot, snapshot kernels launched,
    start, end, host launch ms). `started` (the warm-up's probe only: a query between the call's return and the end
    event): gets whether the start event had fired, i.e. the hold had run out, by the time fn returned."""
    prime()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    hold(hold_ms)
    start.record()
    begin(start)
    t0 = time.perf_counter()
    out = fn(*args)
    host_ms = (time.perf_counter() - t0) * 1e3
    if started is not None:
        started.append(start.query())
    end.record()
    snap, snaps = snapshot(out)
    mark()
    return out, snap, snaps, start, end, host_ms


class Bench:
    """One side's timing of one (shape, dtype): its input sets, its function, the outputs of its last batch."""

    def __init__(self, fn, make_set, sets: list | None = None, n_sets: int = 3):
        self.fn, self.make_set = fn, make_set
        self.rng = random.SystemRandom()          # not reproducible on purpose: the candidate cannot predict it
        self.sets = sets if sets is not None else [make_set(self.rng.randrange(2**31)) for _ in range(n_sets)]
        self.flush = Flusher(next(x.device for x in self.sets[0] if isinstance(x, torch.Tensor)))
        self.kept: list = []
        self.span_kept = None                     # the last span's last output (span_output)

    def refill(self, k: int, seed: int | None = None) -> int:
        seed = self.rng.randrange(2**31) if seed is None else seed
        for dst, src in zip(self.sets[k], self.make_set(seed)):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        settle(self.sets[k])
        return seed

    def warm(self, probe_waits: bool = True) -> dict:
        """Compilation, caches, handles: a varying number of untimed calls (one pass over the sets where a call takes
        WARM_SLOW_MS or more). Returns the probe: the median GPU time and the longest host launch time of three held
        calls, and, where that launch took half the hold or more, `waits_for_gpu`: whether three calls behind a hold
        well past that launch time all returned after the hold had run out (a call that syncs with the GPU, as
        grouped_gemm_moe's cublas_loop reads its offsets back to the host, returns only then, however long the hold;
        launch times under two holds cannot tell: the host's own jitter, as cuBLAS chooses kernels for new expert sizes,
        can hide the difference). `probe_waits=False` (the candidate's worker: the judge sizes the hold from
        the baselines alone) skips that second probe."""
        for _ in range(self.rng.randint(1, 3)):
            for args in self.sets:
                t0 = time.perf_counter()
                guard.poison(self.fn(*args))
            torch.cuda.synchronize()
            if (time.perf_counter() - t0) * 1e3 > WARM_SLOW_MS:      # the pass's last call, to its end on the GPU
                break
        probe = self.batch(3, hold_ms=PROBE_HOLD_MS, keep=False)
        found = {"probe_ms": statistics.median(probe["ms"]), "host_ms": max(probe["host_ms"])}
        if probe_waits and found["host_ms"] >= 0.5 * PROBE_HOLD_MS:
            # A launch as long as the hold: does the call wait for the GPU (a host sync inside it)? Behind a hold
            # well past its own launch time, a call that does not wait returns before the hold runs out; one that
            # waits never does, however long the hold (the judge then sizes the hold without it).
            hold_ms = min(WAIT_PROBE_CAP_MS, 1.5 * found["host_ms"] + WAIT_PROBE_MS)
            longer = self.batch(3, hold_ms=hold_ms, keep=False, ask_started=True)
            found["waits_for_gpu"] = all(longer["started"])
        return found

    def batch(self, calls: int, hold_ms: float, keep: bool, device: str = "cuda", profile: bool = True,
              ask_started: bool = False, drop=None) -> dict:
        """`calls` timed calls, each in a profiler session of its own. Keeps the outputs' snapshots for the judge
        when asked, and with `drop` (the buffer the judge maps, gauntlet.handoff.Drop) writes them there: the
        result's `outputs` says per call its seed, its description and whether its values are in its slot.
        `profile=False` is for measuring the profiler's own effect (scripts/timing_probe.py), never used by the
        worker. `ask_started` (the warm-up's probe): the result's `started` says, per call, whether the hold had
        run out when the call returned (held_call)."""
        self.release()
        ms, host, flush_ms, seeds, outs, snaps, seen = [], [], [], [], [], [], []
        started = [] if ask_started else None
        for _ in range(calls):
            k = self.rng.randrange(len(self.sets))
            seeds.append(self.refill(k))
            guard.reset_persisting_l2()
            f0, f1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            f0.record()
            self.flush()
            f1.record()
            torch.cuda.synchronize()
            with (CallProfiler(device) if profile else contextlib.nullcontext()) as prof:
                out, snap, launched, start, end, host_ms = held_call(self.fn, self.sets[k], hold_ms, started)
                torch.cuda.synchronize()
            seen.append(dict(prof.observed(), snaps=launched) if profile else {})
            host.append(host_ms)
            ms.append(start.elapsed_time(end))
            flush_ms.append(f0.elapsed_time(f1))
            outs.append(out)          # kept on both sides alike (the allocator then behaves the same for both)
            snaps.append(snap)
            del out, snap
        shared = shared_outputs(outs)
        inputs = tuple(x for s in self.sets for x in s)
        # What the parent may check: the snapshot's values, the output's own description (dtype, shape, strides,
        # aliasing), both taken now; the candidate's tensors themselves are poisoned and dropped.
        self.kept = [(seed, guard.describe_output(out, inputs), snap)
                     for seed, out, snap in zip(seeds, outs, snaps)] if keep else []
        for out, snap in zip(outs, snaps):
            if snap is not out:         # a CPU or non-tensor output is its own "snapshot": judged as it is
                guard.poison(out)
        if not keep:
            for snap in snaps:
                guard.poison(snap)
        found = {"ms": ms, "host_ms": host, "flush_ms": flush_ms, "calls": seen, "shared_outputs": shared}
        if keep:
            found["outputs"] = self.hand_over(drop)
        return dict(found, started=started) if ask_started else found

    def span(self, calls: int, hold_ms: float, seed: int, picks: list[int]) -> tuple[bool, str | None]:
        """The outside clock's span (gauntlet.judge.timing.outside): `calls` calls queued back to back behind ONE
        hold, each after the same L2 flush as a timed call, with no profiler and no sync between them, then one
        device-wide sync. The last call runs on an input set refilled from `seed` (the judge's, so its output cannot
        have been made before the request came); the others cycle over the remaining sets (inputs unchanged: the
        flush, not fresh values, is what keeps a call from finding its operands in L2). Each output is dropped
        before the next call (the allocator reuses its block, on both sides alike). The last output's snapshot,
        taken on the stream right after the call, is kept for `span_output`. Returns (whether the hold ran out
        before every call was queued: the GPU then waited for the host, and the span measures the launch; the hex
        bytes of the snapshot's elements at `picks`, modulo its size, in logical order, read after the sync: what
        the parent later finds in the whole output, so the reply could not come before the work was done)."""
        self.drop_span()
        last = self.rng.randrange(len(self.sets))
        self.refill(last, seed)
        others = [k for k in range(len(self.sets)) if k != last] or [last]
        guard.reset_persisting_l2()
        torch.cuda.synchronize()
        held = torch.cuda.Event()
        hold(hold_ms)
        held.record()
        out = None
        for i in range(calls):
            k = last if i == calls - 1 else others[i % len(others)]
            self.flush()
            out = None                       # the previous output's block goes back to the allocator first
            out = self.fn(*self.sets[k])
        starved = held.query()
        snap, _ = snapshot(out)
        torch.cuda.synchronize()
        inputs = tuple(x for s in self.sets for x in s)
        self.span_kept = (seed, guard.describe_output(out, inputs), snap)
        if snap is not out:
            guard.poison(out)
        return starved, picked(snap, picks)

    def span_output(self):
        """(seed, description, snapshot) of the last span's last output."""
        return self.span_kept

    def drop_span(self) -> None:
        kept, self.span_kept = self.span_kept, None
        if kept is not None and type(kept[2]) is torch.Tensor and kept[2].is_cuda:     # noqa: E721 - a snapshot
            guard.poison(kept[2])

    def hand_over(self, drop) -> list[dict]:
        """Each kept snapshot written into its slot of the buffer the judge maps (all of them, then one sync,
        before the reply): per call {seed, meta, slot: whether its values are there}. A snapshot that is not there
        (no buffer, or an output that does not fit: a wrong dtype or shape) stays kept for the reply's blobs."""
        outputs = []
        for k, (seed, meta, snap) in enumerate(self.kept):
            placed = drop is not None and meta["is_tensor"] and drop.put(k, snap)
            outputs.append({"seed": seed, "meta": meta, "slot": bool(placed)})
        if drop is not None:
            torch.cuda.synchronize()
        return outputs

    def release(self) -> None:
        for _, _, snap in self.kept:
            guard.poison(snap)
        self.kept = []
        self.drop_span()


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

