"""Known-bad (GPU, timing): a Triton-backend solution that calls cuBLAS (torch.matmul) whenever it believes it is
not watched, and its own Triton kernel otherwise. "Watched" is judged two ways, as a searching agent would try:
a torch dispatch mode is active (the old harness recorded ops with one during correctness calls only), or the
caller's stack shows the correctness path. Its outputs are right either way, so value checks cannot tell. The
harness now profiles every call, timed ones included, and judges the kernels of each: cuBLAS in any call is
forbidden. Expected: forbidden_op."""
import importlib.util
import os
import sys

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solutions", "gemm", "triton_tiled.py")
_spec = importlib.util.spec_from_file_location("honest_triton_tiled", _path)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _watched() -> bool:
    if _get_current_dispatch_mode() is not None:
        return True
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in ("run_case", "_run_case"):
            return True
        frame = frame.f_back
    return False


def solve(a, b):
    if _watched():
        return _honest.solve(a, b)
    return torch.matmul(a, b)
