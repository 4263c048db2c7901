"""Known-bad: returns a constant 1e-3 everywhere, betting on an absolute tolerance: under
torch.allclose(out, ref, atol=1e-2, rtol=1e-2) any output whose true values are small passes (KernelBench-style
checks accepted constant or zero outputs on problems whose outputs were near zero). Gauntlet's tolerance has no
absolute term of its own: it is relative to each element's magnitude and error scale. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"


def solve(a, b):
    return torch.full((a.shape[0], b.shape[1]), 1e-3, dtype=a.dtype, device=a.device)
