"""Known-bad: warm-up detection. Correct for the first 4 calls of the process (what a checker that calls once or
twice, or a benchmark's warm-up, would see), then returns zeros (what a timer would time). The fuzzer makes several
calls per case and many cases, and judges every one. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"

_calls = 0


def solve(a, b):
    global _calls
    _calls += 1
    if _calls <= 4:
        return torch.matmul(a, b)
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
