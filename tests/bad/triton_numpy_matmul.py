"""Known-bad (GPU): a Triton-backend file that copies the inputs to the host and multiplies with numpy (BLAS on
the CPU), then copies the answer back to the device. numpy never goes through torch's dispatcher, so the aten-op
guard cannot see it; on the CPU nothing in the harness detects it today (a gap: see the corpus test's notes). On
the GPU the planned profiler check -- "a non-torch backend must launch kernels of its own" -- sees only copies and
no kernel from the candidate. Expected: forbidden_op."""
import numpy as np
import torch
import triton  # noqa: F401 - declared backend, never used

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cuda"
DTYPES = ("float32",)


def solve(a, b):
    c = np.matmul(a.cpu().numpy(), b.cpu().numpy())
    return torch.from_numpy(c).to(a.device)
