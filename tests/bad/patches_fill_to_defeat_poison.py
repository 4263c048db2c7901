"""Known-bad: disables the harness's defences that are built on ordinary tensor methods, then replays the 2025
memory-reuse trick. At import it replaces torch.Tensor.fill_ and torch.Tensor.zero_ with versions that do nothing
when called from harness code (frames whose module is harness.*): the worker's poisoning of returned outputs
(guard.poison -> fill_(nan)) and, on the GPU, the timer's L2 flush (_Flusher -> buf.zero_()) silently stop working;
the candidate's own calls still work. Then, like empty_reuses_freed_answer, it computes the first call of each
shape and afterwards returns torch.empty, hoping for the freed, no longer poisoned, earlier answer (stale_output
or garbage: mismatch). The tamper watch covers a fixed list of torch.Tensor attributes that includes neither fill_
nor zero_; it should compare the whole of vars(torch.Tensor) (and torch, torch.cuda, torch.cuda.Event/Stream).
Expected: tampering."""
import sys

import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"

_real_fill, _real_zero = torch.Tensor.fill_, torch.Tensor.zero_


def _from_harness():
    name = sys._getframe(2).f_globals.get("__name__", "")
    return name.startswith("gauntlet.")


def fill_(self, value):
    return self if _from_harness() else _real_fill(self, value)


def zero_(self):
    return self if _from_harness() else _real_zero(self)


torch.Tensor.fill_ = fill_
torch.Tensor.zero_ = zero_
_seen = set()


def solve(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype)
    if key not in _seen:
        _seen.add(key)
        return torch.matmul(a, b)
    return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
