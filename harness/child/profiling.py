"""What ran during each call, seen by torch's profiler: GPU kernels on every stream (on the GPU), aten ops on every
thread (on the CPU, where they are what is judged).

The profiler is not a dispatch mode (a candidate cannot pop it from its own call stack). On the GPU it sees every
stream of the process; on the CPU, with `profile_all_threads`, it records the ops of threads the candidate starts as
well as the caller's. It runs around every call the harness makes to a candidate, correctness and timed alike, and
around every timed baseline call, so a candidate cannot tell checked calls from timed ones by it, and both sides of
a ratio carry the same cost.

One profiler session covers exactly one call (from just before the call to a device-wide sync after it), so every GPU
kernel and every aten op the session saw belongs to that call, whatever stream or thread ran it: no clock alignment
between CPU and GPU timestamps is needed. The child only collects names, durations and each GPU activity's start and end
on the GPU's timeline (relative to the session's first one): the parent decides what is allowed
(`gauntlet.judge.process.kernels`) and whether every kernel ran inside the measured window
(`gauntlet.judge.timing.window`, bounded by the harness's hold and end-marker kernels, gauntlet.gpu).
"""
from __future__ import annotations

import torch
from torch.autograd import profiler as autograd_profiler

from ..gpu import BEGIN_KERNEL
from .launches import PREFIX as LAUNCH_MARK     # Triton interpreter launches (gauntlet.child.launches)


def _config():
    try:
        return torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    except (AttributeError, TypeError):      # an older torch: the calling thread only
        return None


class CallProfiler:
    """One profiler session around one call.

    On the GPU it records GPU activity only (kernels, copies and sets, on every stream, from every thread: CUPTI sees
    the whole process). The verdict there rests on kernels alone (gauntlet.judge.process.kernels), and recording every
    aten op on every thread costs the host time inside the measured window: a host-bound call (many launches after a
    host sync) reads markedly slower with aten ops recorded, while recording GPU activity alone costs it little and a
    GPU-bound call reads the same either way (docs/benchmarks.md). On the CPU the aten ops are the verdict (the
    allowlist, the Triton interpreter's launches), so there it records them, on every thread."""

    def __init__(self, device: str):
        # torch's profiler as torch.profiler.profile builds it (use_kineto, and the activities as use_cpu and
        # use_device), without that wrapper: its start asks hasattr(torch, "_inductor"), which imports
        # torch._inductor (a long chain of pure imports, in every worker's start-up, before its first call could
        # be profiled), to read one inductor setting that only matters for CUDA graphs under CUDA < 12.6.
        self.cuda = device == "cuda"
        if self.cuda:
            self.prof = autograd_profiler.profile(use_cpu=False, use_device="cuda", use_kineto=True)
        else:
            config = _config()
            kwargs = {"experimental_config": config} if config is not None else {}
            self.prof = autograd_profiler.profile(use_cpu=True, use_kineto=True, **kwargs)
        self.events = None

    def __enter__(self):
        self.prof.__enter__()
        return self

    def __exit__(self, *exc):
        self.prof.__exit__(*exc)
        if exc[0] is None:
            self.events = list(self.prof.kineto_results.events())
        return False

    def observed(self, nonce: str = "-", ledger: dict | None = None) -> dict:
        """{"kernels": [[name, µs], ...], "spans": [[start ns, end ns], ...] (one per kernel, in the same order, on
        the GPU's timeline from the session's first GPU activity), "ops": [aten op names], "launches": [kernel
        names], "forged_launches": [range names], "nonce": the call's, "marked": True, "compiled": [the kernel names
        this worker's backends compiled so far (gauntlet.child.provenance)]}. GPU activities are kernels, memcpys and
        memsets, on every stream. Launch ranges (the Triton interpreter's, on the CPU) are sorted into the harness's
        own and forged ones by this call's nonce and ledger (gauntlet.child.launches); every aten op, inside a launch
        range or not, is listed for the allowlist."""
        from . import launches as ledgers
        gpu, spans, cpu, ranges, streams, corrs, api = [], [], set(), [], [], [], {}
        for e in self.events or []:
            name = e.name()
            if name.startswith(LAUNCH_MARK):
                ranges.append((e.start_ns(), e.end_ns(), e.start_thread_id(), name))
            elif e.device_type() != torch.autograd.DeviceType.CPU:
                gpu.append([name, (e.end_ns() - e.start_ns()) / 1e3])
                spans.append((e.start_ns(), e.end_ns()))
                streams.append(_int(e, "device_resource_id"))
                corrs.append(_int(e, "correlation_id"))
            elif name.startswith("aten::"):
                cpu.add(name)
            elif name.startswith(("cu", "hip")):                              # a runtime/driver API call
                api[_int(e, "correlation_id")] = (e.start_ns(), e.end_ns())
        own, forged = ledgers.sort(ranges, nonce, ledger or {})
        t0 = min((a for a, _ in spans), default=0)
        from . import provenance
        return {"compiled": provenance.names(), "kernels": gpu, "spans": [[a - t0, b - t0] for a, b in spans],
                "ops": sorted(cpu), "launches": own, "forged_launches": forged, "nonce": nonce,
                "marked": self.events is not None, "streams": streams, "after_begin": _after_begin(gpu, corrs, api)}


def gpu_work_after(events, marker: str) -> float | None:
    """Milliseconds from the end of the call's `marker` kernel (the end marker, queued on the caller's stream after
    the end event: gauntlet.gpu.mark) to the end of its last GPU activity on any stream, on the GPU's own clock; None
    where the profile holds no such marker (then the caller's host measurement stands)."""
    gpu = [(e.name(), e.end_ns()) for e in events or [] if e.device_type() != torch.autograd.DeviceType.CPU]
    marks = [end for name, end in gpu if name == marker]
    if not marks:
        return None
    return max(0.0, (max(end for _, end in gpu) - max(marks)) / 1e6)


def _int(event, attr: str) -> int:
    try:
        return int(getattr(event, attr)())
    except (AttributeError, TypeError, ValueError, RuntimeError):    # an older torch without it
        return 0


def _after_begin(gpu: list, corrs: list[int], api: dict) -> list[bool]:
    """Per GPU activity: whether the host call that queued it (matched by CUPTI's correlation id) began after the
    call that queued the harness's begin marker had returned. The begin marker is queued right after the start
    event is recorded, on the same host thread, so such an activity was queued after the start event: on the start
    event's stream it cannot run before the event fired (gauntlet.judge.timing.window uses that to place the window's
    opening when the begin marker itself started late). False wherever the profiler did not say."""
    api.pop(0, None)                             # no correlation id: pairs with nothing
    begin = [c for (name, _), c in zip(gpu, corrs) if name == BEGIN_KERNEL]
    if len(begin) != 1 or begin[0] not in api:
        return [False] * len(gpu)
    begun = api[begin[0]][1]
    return [c in api and c != begin[0] and api[c][0] > begun for c in corrs]
