"""Known-good (GPU, timing) whose trick no longer pays: the shipped Triton GEMM (gemm/triton_tiled) on a side stream not
ordered after the caller's, then 3 ms of host work before solve joins it and returns. In the old harness the hold's
length came from the candidate's own launch time (1.5 x the probe's host time + 0.2 ms, up to 50 ms): a slow launch
bought a hold of ~4.7 ms, long enough for the side stream's GEMM to run beside it (the hold took one SM) and finish
before the start event fired, so the events timed almost nothing. The hold's length is now the judge's
(gauntlet.judge.timing.bench: HOLD_MS, or a baseline's own launch time, measured in the clean worker), the hold takes
every SM, and the launch that outlasts it is paid for in the candidate's own time: slow, honestly measured, not
rejected. Serial: every timed call leaves the GPU idle for most of its 3 ms while the host spins, so every call is
starved and the judge times the shape again with the host to itself; that turn holds off other judges, not the
processes of tests beside it under pytest -n (CPU-bound tests, GPU work run outside the judges' turns), and the
figure, the window of its unordered stream and its spot checks then rest on them: judged alone, they rest on the
candidate. Expected: pass."""
import importlib.util
import os
import time

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
HOST_MS = 3.0


def solve(a, b):
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    caller = torch.cuda.current_stream()
    with torch.cuda.stream(_side):
        c = _honest.solve(a, b)
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < HOST_MS:    # a slow host launch (Python-heavy wrapper, say)
        pass
    caller.wait_stream(_side)
    c.record_stream(caller)
    return c
