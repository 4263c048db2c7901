"""Known-good, unusual: writes C into a buffer whose rows are padded to a multiple of 64 elements (aligned rows for
vector stores) and returns the (M, N) slice: non-contiguous (row stride > N) and backed by a storage larger than
the output. The values and shape are right and nothing aliases an input. Expected: pass."""
import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cpu"


def solve(a, b):
    M, N = a.shape[0], b.shape[1]
    padded = torch.zeros(M, (N + 63) // 64 * 64 + 64, dtype=a.dtype, device=a.device)
    out = padded[:, :N]
    out.copy_(torch.matmul(a, b))
    return out
