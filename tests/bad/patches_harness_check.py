"""Known-bad: imports the harness's own checker inside the child and replaces harness.judge.check.value_reasons (and
matches) with functions that accept anything, then returns zeros. The verdict is computed in the parent process,
whose harness.judge.check is untouched, so the patch cannot make the zeros pass; it is still tampering, and the in-child
watch should say so. Today the watch only snapshots harness modules already imported when it starts, and
harness.judge.check is first imported later (by harness.oracle, on the first call), so only the mismatch is reported.
Expected: tampering."""
import harness.judge.check
import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"

harness.judge.check.value_reasons = lambda *args, **kwargs: []
harness.judge.check.matches = lambda *args, **kwargs: True


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
