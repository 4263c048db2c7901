"""Known-bad: a Triton-backend file that hides the GEMM as a batch of one: (a.unsqueeze(0) @ b.unsqueeze(0))[0]
(aten.bmm / matmul, cuBLAS on the GPU), which a filter looking only for aten.mm would miss. Expected: forbidden_op."""
import triton  # noqa: F401 - declared backend, never used

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cpu"


def solve(a, b):
    return (a.unsqueeze(0) @ b.unsqueeze(0))[0]
