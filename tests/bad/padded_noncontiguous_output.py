"""Known-bad since problems declare their output layout (gemm: a new contiguous tensor, the default): writes C into a
buffer whose rows are padded to a multiple of 64 elements and returns the (M, N) slice, non-contiguous (row stride
> N). The values and shape are right and nothing aliases an input, but a caller that reads the result as row-major
memory (a view, a DLPack export, a kernel of its own) reads the padding. Expected: wrong_layout."""
import torch

BACKEND = "torch"
EXPECTED = "wrong_layout"
DEVICE = "cpu"


def solve(a, b):
    M, N = a.shape[0], b.shape[1]
    padded = torch.zeros(M, (N + 63) // 64 * 64 + 64, dtype=a.dtype, device=a.device)
    out = padded[:, :N]
    out.copy_(torch.matmul(a, b))
    return out
