"""Known-bad (GPU, timing): an honest, correct Triton GEMM (the shipped gemm/triton_tiled) plus one trick: at import,
before cuBLAS makes its handle in this process, it sets environment variables and torch switches that steer cuBLAS
to slower choices (no workspace, no reduced-precision reductions, the non-Lt path). The baseline used to be timed in
this process and inherited them (1.14x measured on an H100). The baselines now run in a clean worker; the worker
also snapshots these variables and switches before the import and reports a change. Expected: tampering (or the
honest speedup)."""
import importlib.util
import os

import torch

BACKEND = "triton"
EXPECTED = "tampering"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":0:0"
os.environ["CUBLASLT_WORKSPACE_SIZE"] = "0"
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
try:
    torch.backends.cuda.preferred_blas_library("cublas")
except Exception:  # noqa: BLE001
    pass

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solutions", "gemm", "triton_tiled.py")
_spec = importlib.util.spec_from_file_location("honest_triton_tiled", _path)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def solve(a, b):
    return _honest.solve(a, b)
