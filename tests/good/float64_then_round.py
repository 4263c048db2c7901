"""Known-good, unusual: computes in float64 and rounds once to the output dtype: more accurate than torch's own op
(at most half an ulp of the output dtype off the exact product). Being better than torch is always within a
budget of k times torch's error. Expected: pass."""
import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cpu"


def solve(a, b):
    return torch.matmul(a.double(), b.double()).to(a.dtype)
