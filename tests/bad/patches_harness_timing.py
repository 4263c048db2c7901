"""Known-bad: replaces the child's timing loop (gauntlet.child.timing.Bench.batch, a method: the class object itself
stays the same) and gauntlet.judge.timing.scoring.median from the candidate's module body, while computing the right
answer. On the GPU the patched loop would report the candidate's times divided by 100. The judge's scoring runs in the
parent, out of reach; the child's tamper watch covers the code of harness classes' methods as well as module functions,
so the patched method is reported at import. Expected: tampering."""
import gauntlet.child.timing
import gauntlet.judge.timing.scoring
import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"

_real_batch = gauntlet.child.timing.Bench.batch


def _fast_batch(self, *args, **kwargs):
    result = _real_batch(self, *args, **kwargs)
    result["ms"] = [t / 100 for t in result["ms"]]
    return result


gauntlet.child.timing.Bench.batch = _fast_batch
gauntlet.judge.timing.scoring.median = lambda xs: min(xs)


def solve(a, b):
    return torch.matmul(a, b)
