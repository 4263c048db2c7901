"""Known-good, unusual: memoises answers by a full content hash (SHA-256 of every byte of both inputs, plus shape
and dtype). A hit therefore means bit-identical inputs, for which the cached answer is exactly right; the fuzzer
draws fresh inputs for every call, so it never hits and every answer is computed. Harmless, and slow: hashing
copies both inputs to the host, which costs more than the product on a GPU. (Compare bad/cache_by_data_ptr.py
-- addresses are not contents -- and bad/fingerprint_cache_for_timing.py, where a cheap sampled hash turns the
timer's reused input sets into lookups.) Expected: pass."""
import hashlib

import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cpu"

_cache = {}


def _digest(x):
    host = x.detach().to("cpu").contiguous()
    return hashlib.sha256(host.reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def solve(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype, _digest(a), _digest(b))
    if key not in _cache:
        if len(_cache) > 16:
            _cache.clear()
        _cache[key] = torch.matmul(a, b)
    return _cache[key].clone()
