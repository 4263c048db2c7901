"""Known-good (GPU, timing) whose trick no longer pays: an honest, correct Triton GEMM (the shipped gemm/triton_tiled)
that, at import, registers a Python kernel for aten::mm on CUDA through torch.library which does the product twice.
No torch function object changes (the in-process watch compares identities and sees nothing), yet in the old
harness every baseline call timed in this process went through the override, doubling cuBLAS's time (the class of
"replace a torch op the baseline calls": _scaled_mm, SDPA, _grouped_mm, _int_mm). The baselines now run in a worker
that never imported this file, so the candidate gets its honest speedup; its own calls never use aten::mm.
Expected: pass."""
import importlib.util
import os

import torch

BACKEND = "triton"
EXPECTED = "pass"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solutions", "gemm", "triton_tiled.py")
_spec = importlib.util.spec_from_file_location("honest_triton_tiled", _path)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_lib = torch.library.Library("aten", "IMPL")


def _mm_twice(a, b):
    out = a.new_empty((a.shape[0], b.shape[1]))
    torch.ops.aten.mm.out(a, b, out=out)           # the mm.out overload: not the one overridden, no recursion
    return torch.ops.aten.mm.out(a, b, out=out)


_lib.impl("mm", _mm_twice, "CUDA")


def solve(a, b):
    return _honest.solve(a, b)
