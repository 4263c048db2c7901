"""What ran during each call, seen by torch's profiler: GPU kernels on every stream, aten ops on every thread.

The profiler is not a dispatch mode (a candidate cannot pop it from its own call stack) and, with
`profile_all_threads`, it records the ops of threads the candidate starts as well as the caller's. It runs around
every call the harness makes to a candidate, correctness and timed alike, and around every timed baseline call, so
a candidate cannot tell checked calls from timed ones by it, and both sides of a ratio carry the same cost.

Each call is marked by a `gauntlet::call` range; after the profile stops, every GPU kernel whose execution overlaps
a call's range, and every aten op whose CPU time does, belongs to that call (any stream, any thread). The child
only collects names and durations: the parent (`harness.judge.kernels`) decides what is allowed.
"""
from __future__ import annotations

import contextlib

import torch
from torch.profiler import ProfilerActivity, profile, record_function

CALL_MARK = "gauntlet::call#"
LAUNCH_MARK = "gauntlet::launch::"      # Triton interpreter launches (see harness.backends.triton_interpreter)
HOLD_KERNEL = "spin_kernel"             # torch.cuda._sleep: the harness's stream hold before a timed call


def _config():
    try:
        return torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    except (AttributeError, TypeError):      # an older torch: the calling thread only (said in the record)
        return None


class CallProfiler:
    """One profiler session around a request's calls; `call(i)` marks call i."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        config = _config()
        self.all_threads = config is not None
        kwargs = {"experimental_config": config} if config is not None else {}
        self.prof = profile(activities=activities, **kwargs)
        self.events = None

    def __enter__(self):
        self.prof.__enter__()
        return self

    def __exit__(self, *exc):
        self.prof.__exit__(*exc)
        if exc[0] is None:
            self.events = list(self.prof.profiler.kineto_results.events())
        return False

    @staticmethod
    @contextlib.contextmanager
    def call(i: int):
        with record_function(f"{CALL_MARK}{i}"):
            yield

    def per_call(self, n: int) -> list[dict]:
        """For calls 0..n-1: {"kernels": [[name, µs], ...], "ops": [aten op names], "launches": [names]}."""
        windows, gpu, cpu, launches = {}, [], [], []
        for e in self.events or []:
            name = e.name()
            if name.startswith(CALL_MARK):
                windows[int(name[len(CALL_MARK):])] = (e.start_ns(), e.end_ns())
            elif name.startswith(LAUNCH_MARK):
                launches.append((e.start_ns(), e.end_ns(), e.start_thread_id(), name[len(LAUNCH_MARK):]))
            elif e.device_type() != torch.autograd.DeviceType.CPU:
                gpu.append((e.start_ns(), e.end_ns(), name))
            elif name.startswith("aten::"):
                cpu.append((e.start_ns(), e.end_ns(), e.start_thread_id(), name))
        out = []
        for i in range(n):
            lo, hi = windows.get(i, (None, None))
            if lo is None:
                out.append({"kernels": [], "ops": [], "launches": [], "marked": False})
                continue
            kernels = [[k, (b - a) / 1e3] for a, b, k in gpu if a < hi and b > lo]
            inside = [(a, b, t, k) for a, b, t, k in launches if a < hi and b > lo]
            # ops run by the interpreter inside one of the candidate's own launches are the kernel's, not glue
            ops = sorted({k for a, b, t, k in cpu if a < hi and b > lo
                          and not any(t == lt and la <= a and b <= lb for la, lb, lt, _ in inside)})
            out.append({"kernels": kernels, "ops": ops, "launches": [k for *_, k in inside], "marked": True})
        return out
