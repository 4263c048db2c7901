"""Known-good, unusual: computes C^T = B^T A^T into a contiguous (N, M) buffer (the layout a column-major kernel
produces) and returns its transpose: a view of shape (M, N) with strides (1, M), holding the right values. The
contract asks for a new tensor of the right shape and dtype; it does not ask for row-major strides. (Compare
bad/transposed_output.py, which returns the (N, M) tensor itself: wrong shape.) Expected: pass."""
import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cpu"


def solve(a, b):
    ct = torch.matmul(b.t(), a.t()).contiguous()   # (N, M), row-major
    return ct.t()                                  # (M, N), column-major view
