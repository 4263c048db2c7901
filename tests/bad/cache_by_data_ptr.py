"""Known-bad: caches the answer keyed by the inputs' data pointers (plus shape and dtype). Fresh inputs of the same
shape are usually allocated at the same addresses the previous call's inputs were freed from (the CUDA caching
allocator makes this near-certain; glibc's malloc does it on the CPU too), so the cache "hits" on new data and
returns an earlier call's answer. Seen on GPU MODE leaderboards as "cache by tensor identity". Expected: stale_output."""
import torch

BACKEND = "torch"
EXPECTED = "stale_output"
DEVICE = "cpu"

_cache = {}


def solve(a, b):
    key = (a.data_ptr(), b.data_ptr(), tuple(a.shape), tuple(b.shape), a.dtype)
    if key not in _cache:
        _cache[key] = torch.matmul(a, b)
    return _cache[key].clone()
