"""Known-bad: replaces torch.cuda.synchronize with a no-op inside solve, so a harness that syncs before stopping its
timer (or before copying the output) would stop the clock while the candidate's work is still queued. Detectable
without a GPU: the child compares the function's identity after every call. Expected: tampering."""
import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"


def solve(a, b):
    torch.cuda.synchronize = lambda device=None: None
    return torch.matmul(a, b)
