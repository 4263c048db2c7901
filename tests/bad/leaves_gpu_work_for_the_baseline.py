"""Known-bad (GPU, timing): an honest, correct Triton GEMM plus one trick against a baseline timed in another process:
every call also queues ~20 ms of busy work on a side stream it never waits for. Its own events end early, but the
work is still on the GPU when its worker is stopped and the baseline worker times its calls, so the baseline would
share the GPU with it and look slow. The baseline worker's quiet check (its flush time against the idle GPU's) sees
the GPU busy; the candidate's own correctness calls see a slow device-wide sync after solve returned.
The busy work is a spin kernel of the candidate's own (Triton), so that only the background check can catch it: with
torch's `torch.cuda._sleep`, as this file first had, the allowlist names at::cuda's spin_kernel first (forbidden_op,
seen on an H100), which is right but leaves the check this file is for untested.
Expected: background_work."""
import importlib.util
import os

import torch
import triton
import triton.language as tl

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
_cell = None


@triton.jit
def _spin(cell_ptr, n):
    # A dependent chain of n multiply-adds in one program: ~4 ns each on an H100, so n = 5e6 is ~20 ms. n is a
    # run-time argument and the result is stored, so the loop is neither unrolled nor removed.
    x = tl.load(cell_ptr)
    for _ in range(n):
        x = x * 0.999999 + 1e-6
    tl.store(cell_ptr, x)


def solve(a, b):
    global _side, _cell
    out = _honest.solve(a, b)
    if _side is None:
        _side = torch.cuda.Stream()
        _cell = torch.zeros(1, device=a.device, dtype=torch.float32)
    with torch.cuda.stream(_side):
        _spin[(1,)](_cell, 5_000_000)
    return out
