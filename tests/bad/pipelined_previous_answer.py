"""Known-bad: "pipelining" across calls. Each call starts the current product but returns the previous call's
finished answer when the shape matches (so on a GPU, the timed call would only pay for a launch while the work
overlaps the next call). The first call of a shape has nothing queued and returns its own answer. Every later call
with fresh inputs gets the answer to the call before it. Expected: stale_output."""
import torch

BACKEND = "torch"
EXPECTED = "stale_output"
DEVICE = "cpu"

_pending = {}


def solve(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype)
    current = torch.matmul(a, b)
    previous = _pending.get(key)
    _pending[key] = current
    return current if previous is None else previous
