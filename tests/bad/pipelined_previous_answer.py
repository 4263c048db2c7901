"""Known-bad: "pipelining" across calls. Each call starts the current product but returns the previous call's
finished answer when the shape matches (so on a GPU, the timed call would only pay for a launch while the work
overlaps the next call). The first call of a shape has nothing queued and returns its own answer. Every later call
with fresh inputs gets the answer to the call before it. (Each buffer is handed out once, one call late: were the
same tensor returned twice, the worker's poisoning of returned outputs would turn it into NaNs: nan_mismatch.)
The corpus test replays one case (CASE) with an output of 33x17: the judge calls an output stale only from 16
elements up (a tiny output can equal an earlier answer by chance), so the fuzzer's first, 1x1x1 case would be
reported as a plain mismatch. Expected: stale_output."""
import torch

BACKEND = "torch"
EXPECTED = "stale_output"
DEVICE = "cpu"
CASE = "M=33,N=17,K=65,seed=5"

_pending = {}


def solve(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype)
    current = torch.matmul(a, b)
    previous = _pending.get(key)
    _pending[key] = current
    return current.clone() if previous is None else previous   # a buffer never handed out before
