"""Known-bad: overwrites input B with zeros and returns zeros, so that any check that recomputes the reference from
the candidate's (now zeroed) inputs after the call agrees: A @ 0 == 0. The judge regenerates the inputs itself from
the seed, and the child reports a digest of each input after the call, which no longer matches the pristine one.
Expected: input_mutated (the guard reasons are reported before values are compared; the values would also fail)."""
import torch

BACKEND = "torch"
EXPECTED = "input_mutated"
DEVICE = "cpu"


def solve(a, b):
    b.zero_()
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
