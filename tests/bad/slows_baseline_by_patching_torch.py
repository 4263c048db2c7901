"""Known-bad (GPU, timing): an honest, correct Triton GEMM (the shipped gemm/triton_tiled, loaded from its file) plus
one trick: at import it replaces torch.matmul, torch.mm, torch.Tensor.__matmul__ and friends with versions that do
the product twice. The baseline (torch.matmul) used to be timed in the candidate's process, so its time doubled and
the candidate's "speedup" with it (the same class as patching _scaled_mm, SDPA, _grouped_mm or _int_mm). With the
baselines in a clean worker the patch cannot reach them; the in-process watch also sees the replaced functions.
Expected: tampering (or the honest speedup)."""
import importlib.util
import os

import torch

BACKEND = "triton"
EXPECTED = "tampering"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solutions", "gemm", "triton_tiled.py")
_spec = importlib.util.spec_from_file_location("honest_triton_tiled", _path)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _twice(fn):
    def slow(*args, **kwargs):
        fn(*args, **kwargs)
        return fn(*args, **kwargs)
    return slow


torch.matmul = _twice(torch.matmul)
torch.mm = _twice(torch.mm)
torch.Tensor.__matmul__ = _twice(torch.Tensor.__matmul__)
torch.nn.functional.linear = _twice(torch.nn.functional.linear)


def solve(a, b):
    return _honest.solve(a, b)
