"""Known-bad: caches the answer by input shape, so later calls with fresh inputs of the same shape get an earlier
call's answer (GPU MODE leaderboards saw this). Expected: stale_output."""
import torch

BACKEND = "torch"
_cache = {}


def solve(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype)
    if key not in _cache:
        _cache[key] = torch.matmul(a, b)
    return _cache[key].clone()
