"""Known-good by the harness's design (GPU): a would-be timing cheat that the harness defuses, so it is judged as
what it then is -- a correct solution with a useless cache. It caches answers keyed by a cheap fingerprint of the
inputs (shape, dtype and 64 sampled elements of each). Fresh fuzzed inputs never hit. Against a timer that
rotates a few fixed input sets, every timed call after the warm-up would be a lookup plus a copy of C (GPU MODE:
"caching across benchmark iterations"), memory-bound work timed as a compute-bound GEMM, and only a roofline check
would catch it. Gauntlet's timer rewrites each input set in place with fresh values from a fresh seed before every
timed call, so the fingerprint changes and every timed call computes; the cache only costs time (the fingerprint
syncs the host, which also keeps it out of CUDA graphs). If refilling is ever dropped, this file should start
failing with below_roofline. Expected: pass."""
import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_cache = {}
_idx = {}


def _fingerprint(x):
    n = x.numel()
    if n not in _idx:
        steps = min(64, n)      # integer positions: a float32 linspace can round its last one up to n (out of range)
        _idx[n] = torch.arange(steps, device=x.device) * (n - 1) // max(1, steps - 1)
    return tuple(x.reshape(-1)[_idx[n]].float().tolist())


def solve(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype, _fingerprint(a), _fingerprint(b))
    hit = _cache.get(key)
    if hit is None:
        hit = _cache[key] = torch.matmul(a, b)
        if len(_cache) > 8:
            _cache.pop(next(iter(_cache)))
    return hit.clone()
