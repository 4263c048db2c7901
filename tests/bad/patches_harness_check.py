"""Known-bad: imports the harness's own checker inside the child and replaces gauntlet.judge.values.check.value_reasons
(and matches) with functions that accept anything, then returns zeros. The verdict is computed in the parent process,
whose gauntlet.judge.values.check is untouched, so the patch cannot make the zeros pass. Since the judge/child split the
child never imports gauntlet.judge at all: the candidate patches a copy only it uses, and the zeros are judged for what
they are. Expected: mismatch."""
import gauntlet.judge.values.check
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"

gauntlet.judge.values.check.value_reasons = lambda *args, **kwargs: []
gauntlet.judge.values.check.matches = lambda *args, **kwargs: True


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
