"""Known-bad since problems declare their output layout (gemm: a new contiguous tensor, the default): computes
C^T = B^T A^T into a contiguous (N, M) buffer (the layout a column-major kernel produces) and returns its transpose,
a view of shape (M, N) with strides (1, M) holding the right values. A problem that accepts any strides says
`output_layout: any` in its problem.yaml. (Compare transposed_output.py, which returns the (N, M) tensor itself:
wrong shape.) Expected: wrong_layout."""
import torch

BACKEND = "torch"
EXPECTED = "wrong_layout"
DEVICE = "cpu"


def solve(a, b):
    ct = torch.matmul(b.t(), a.t()).contiguous()   # (N, M), row-major
    return ct.t()                                  # (M, N), column-major view
