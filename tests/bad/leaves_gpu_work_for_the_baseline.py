"""Known-bad (GPU, timing): an honest, correct Triton GEMM plus one trick against a baseline timed in another process:
every call also queues ~20 ms of busy work on a side stream it never waits for. Its own events end early, but the
work is still on the GPU when its worker is stopped and the baseline worker times its calls, so the baseline would
share the GPU with it and look slow. The baseline worker's quiet check (its flush time against the idle GPU's) sees
the GPU busy; the candidate's own correctness calls see a slow device-wide sync after solve returned.
Expected: background_work."""
import importlib.util
import os

import torch

BACKEND = "triton"
EXPECTED = "background_work"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solutions", "gemm", "triton_tiled.py")
_spec = importlib.util.spec_from_file_location("honest_triton_tiled", _path)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_side = None


def solve(a, b):
    global _side
    out = _honest.solve(a, b)
    if _side is None:
        _side = torch.cuda.Stream()
    with torch.cuda.stream(_side):
        torch.cuda._sleep(int(20e-3 * 1.8e9))        # ~20 ms at ~1.8 GHz
    return out
