"""Known-good (GPU, timing) whose trick no longer pays: the shipped Triton GEMM (gemm/triton_tiled), launched on a
side stream that is NOT made to wait for the caller's stream (the inputs were ready before the call: the harness
syncs the device first), and joined back before solve returns (the caller's stream waits for the side stream). In
the old harness the stream hold was a spin kernel on one SM of the caller's stream: the side stream's GEMM ran on
the other SMs beside it, finished before the start event fired, and the events timed an empty interval (1.29x for a
kernel whose honest ratio was 0.96x, H100). The hold now takes every SM of the GPU (gauntlet.gpu), so the GEMM
starts only as the hold's blocks retire (on an H100, 0.6-0.7 us before the hold's recorded end) and is timed in
full, and the profiler's timeline shows it inside the window (gauntlet.judge.timing.window; it takes the SMs before the
begin marker gets one, which the window allows for): an honest but unordered side stream is not rejected, and gets
its honest speedup (compare the shipped kernel's, scripts/timing_probe.py --window). Expected: pass.

Serial: the GEMM waits for the hold only because the hold holds every SM; under pytest -n other tests' processes
run kernels on the same card outside the judges' turns, and with the hold's blocks sharing the SMs with theirs the
GEMM can start long before the hold ends: `tampering`, outside the window."""
import importlib.util
import os

import torch

BACKEND = "triton"
EXPECTED = "pass"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True
SERIAL = True

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solutions", "gemm", "triton_tiled.py")
_spec = importlib.util.spec_from_file_location("honest_triton_tiled", _path)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_side = None


def solve(a, b):
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    caller = torch.cuda.current_stream()
    with torch.cuda.stream(_side):               # no _side.wait_stream(caller): it runs as soon as the GPU lets it
        c = _honest.solve(a, b)
    caller.wait_stream(_side)
    c.record_stream(caller)
    return c
