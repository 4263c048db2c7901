"""A correctness call and a timed call look alike from inside the worker (issue 16, item 2), on the CPU: the inputs'
version counters, a SIGCONT before every request, the profiler's timeline. (The GPU side, the hold that fills every
SM, the end marker and the snapshot, is exercised by the `gpu` fixtures tests/bad/defers_work_past_the_end_event.py,
tests/bad/completes_output_on_sigcont.py, tests/good/side_stream_beside_the_hold.py and
tests/good/slow_launch_for_a_longer_hold.py, and by scripts/timing_probe.py.)"""
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from gauntlet import discover
from gauntlet.child import guard
from gauntlet.child.profiling import CallProfiler
from gauntlet.child.timing import INPUT_VERSION, settle
from gauntlet.inputs import make_inputs


def test_inputs_show_the_same_version_counter_however_often_they_were_refilled():
    problem = discover.get_problem("gemm")
    spec = problem.dtype("float32")
    fresh, _ = guard.banded(make_inputs(problem, {"M": 8, "N": 8, "K": 8}, spec, 1, "cpu"))
    refilled, _ = guard.banded(make_inputs(problem, {"M": 8, "N": 8, "K": 8}, spec, 2, "cpu"))
    for _ in range(7):                                   # a timed set, refilled in place call after call
        for dst, src in zip(refilled, make_inputs(problem, {"M": 8, "N": 8, "K": 8}, spec, 3, "cpu")):
            dst.copy_(src)
    assert {x._version for x in refilled} != {x._version for x in fresh}
    settle(fresh)
    settle(refilled)
    assert {x._version for x in fresh} == {x._version for x in refilled} == {INPUT_VERSION}
    settle((3, None))                                   # non-tensor inputs are left alone


def test_snapshot_leaves_anything_but_a_cuda_tensor_as_it_is_and_launches_nothing():
    from gauntlet.gpu import snapshot
    for out in (torch.ones(3), [1, 2], None):
        same, launched = snapshot(out)
        assert same is out and launched == 0


def test_the_profiler_reports_a_timeline_beside_the_kernels():
    with CallProfiler("cpu") as prof:
        torch.ones(4).add_(1)
    seen = prof.observed()
    assert seen["spans"] == [] and seen["kernels"] == [] and seen["marked"] is True


_COUNTER = r"""
import os, signal, sys, time
path = sys.argv[1]
def on_cont(signum, frame):
    with open(path, "a") as fh:
        fh.write("c")
signal.signal(signal.SIGCONT, on_cont)
open(path + ".ready", "w").close()
while True:
    time.sleep(0.01)
"""


def _sigconts(path: str, want: int) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        n = len(open(path).read()) if os.path.exists(path) else 0
        if n >= want:
            return n
        time.sleep(0.01)
    return len(open(path).read()) if os.path.exists(path) else 0


def test_every_request_reaches_a_worker_that_was_just_stopped_and_continued(tmp_path):
    """Child.cont() runs before every request: a running worker is stopped and continued, a stopped one (the
    other side was timed) continued, so a SIGCONT handler fires alike before a correctness request and a timed
    batch."""
    from gauntlet.judge.process.isolate import Child
    from gauntlet.judge.process.pids import stat as _stat
    path = str(tmp_path / "conts")
    proc = subprocess.Popen([sys.executable, "-c", _COUNTER, path], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(path + ".ready") and time.monotonic() < deadline:
            time.sleep(0.01)
        child = Child.__new__(Child)
        child.proc, child.alive, child.stopped = proc, True, False
        child.started = _stat(proc.pid)[4]
        child.cont()                                     # a correctness request: the worker was running
        assert _sigconts(path, 1) == 1
        child.stop()                                     # the other side is timed
        deadline = time.monotonic() + 5
        while _stat(proc.pid)[0] not in "Tt" and time.monotonic() < deadline:
            time.sleep(0.005)
        assert _stat(proc.pid)[0] in "Tt"
        child.cont()                                     # a timed batch
        assert _sigconts(path, 2) == 2
        child.cont()
        assert _sigconts(path, 3) == 3 and _stat(proc.pid)[0] not in "Tt"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_worker_says_which_gpu_activities_the_host_queued_after_the_begin_marker():
    """gauntlet.child.profiling._after_begin, on a timeline shaped like one the H100's profiler recorded (2026-11-27:
    cuLaunchKernel / cudaEventRecordWithFlags on the host, kernels on streams 7 and 13, paired by correlation id)."""
    from gauntlet.child.profiling import _after_begin
    gpu = [["gauntlet_hold", 1.0], ["gauntlet_begin", 1.0], ["fill", 1.0], ["queued_in_the_hold", 1.0], ["x", 1.0]]
    corrs = [10, 12, 14, 11, 0]
    api = {10: (100, 110), 11: (111, 113), 12: (120, 130), 14: (131, 140)}   # correlation id -> host (start, end)
    assert _after_begin(gpu, corrs, api) == [False, False, True, False, False]
    # an API call without a correlation id (0) pairs with no activity, however late it began
    assert _after_begin(gpu, corrs, {**api, 0: (500, 510)}) == [False, False, True, False, False]
    # no begin marker (or its launch unseen): nothing is said to be after it
    assert _after_begin(gpu[2:], corrs[2:], api) == [False] * 3
    assert _after_begin(gpu, corrs, {k: v for k, v in api.items() if k != 12}) == [False] * 5


def test_work_past_the_end_marker_is_read_from_the_gpu_timeline_not_the_host_clock():
    """gauntlet.child.profiling.gpu_work_after, which the correctness call's straggler check asks once the host's
    clock found the device-wide sync slow (a preempted host thread reads as GPU work otherwise: attn_scores/triton_gqa,
    one kernel on one stream, was ruled `background_work` at 4.1 ms on a busy H200 host): the time from the end
    marker's end to the last GPU activity's end, on any stream; None where the marker is missing."""
    from gauntlet.child.profiling import gpu_work_after
    from gauntlet.gpu import MARK_KERNEL

    class Ev:
        def __init__(self, name, end_ns, gpu=True):
            self._name, self._end, self._gpu = name, end_ns, gpu

        def name(self):
            return self._name

        def end_ns(self):
            return self._end

        def device_type(self):
            return torch.autograd.DeviceType.CUDA if self._gpu else torch.autograd.DeviceType.CPU

    call = [Ev("gauntlet_hold", 1_000_000), Ev("_kernel", 3_000_000), Ev("gauntlet_snap", 3_100_000),
            Ev(MARK_KERNEL, 3_110_000), Ev("cudaDeviceSynchronize", 9_000_000, gpu=False)]
    assert gpu_work_after(call, MARK_KERNEL) == 0.0          # a slow host sync, and no GPU work after the marker
    side = call + [Ev("side_stream_sleep", 8_110_000)]        # a side stream's kernel 5 ms past the marker
    assert abs(gpu_work_after(side, MARK_KERNEL) - 5.0) < 1e-9
    assert gpu_work_after([e for e in side if e.name() != MARK_KERNEL], MARK_KERNEL) is None
    assert gpu_work_after(None, MARK_KERNEL) is None


def test_an_observed_cpu_call_carries_empty_stream_lists():
    with CallProfiler("cpu") as prof:
        torch.ones(4) + 1
    seen = prof.observed()
    assert seen["streams"] == [] and seen["after_begin"] == [] and seen["kernels"] == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_warm_up_probe_tells_a_call_that_waits_for_the_gpu_from_a_long_launch():
    """Bench.warm's `waits_for_gpu`: a call with a host sync inside (grouped_gemm_moe's cublas_loop reads offsets
    back) is found, and one whose launch is merely long (a host sleep, no sync) is not: the judge sizes the hold
    from the second and not the first (gauntlet.judge.timing.bench.Schedule.run). A fast call needs no second probe,
    and gets none where its launches took under half the probe's hold; on a loaded host (pytest -n beside it) one
    of its launches can be preempted for longer, and then the second probe must find that it does not wait."""
    from gauntlet.child.timing import PROBE_HOLD_MS, Bench
    x = torch.randn(256, 256, device="cuda")

    def syncs(a):
        n = int(a.sum().item() != 0.5) + 1          # a device-to-host read: waits for the hold
        return a * n

    def slow_launch(a):
        time.sleep(PROBE_HOLD_MS * 1.5 / 1e3)        # longer than the probe's hold, and no sync
        return a * 2

    for fn, waits in ((syncs, True), (slow_launch, False), (lambda a: a * 3, None)):
        found = Bench(fn, lambda seed: [x.clone()], n_sets=1).warm()
        if waits is None and found["host_ms"] >= 0.5 * PROBE_HOLD_MS:    # a launch the busy host held up
            waits = False
        assert found.get("waits_for_gpu") == waits, (fn, found)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_slow_call_is_warmed_up_by_one_pass_and_a_fast_one_by_one_to_three():
    """Bench.warm: a pass whose last call took WARM_SLOW_MS or more ends the warm-up (its compiling was done by the
    pass's first call); a fast call keeps the random 1 to 3 passes, so its count of untimed calls still varies."""
    from gauntlet.child.timing import WARM_SLOW_MS, Bench
    x = torch.randn(64, 64, device="cuda")
    cycles = int(4e6 * WARM_SLOW_MS)               # about twice WARM_SLOW_MS at 2 GHz (10**7 cycles: ~5 ms on an H100)

    def counted(slow):
        calls = []

        def fn(a):
            calls.append(1)
            if slow:
                torch.cuda._sleep(cycles)
            return a * 2
        bench = Bench(fn, lambda seed: [x.clone()], n_sets=3)
        bench.warm(probe_waits=False)
        return len(calls) - 3                          # less the probe's three held calls
    assert counted(True) == 3
    assert {counted(False) for _ in range(12)} <= {3, 6, 9}
