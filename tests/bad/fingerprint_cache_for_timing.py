"""Known-bad (GPU): caches answers keyed by a cheap fingerprint of the inputs (shape, dtype and 64 sampled
elements of each). Fresh inputs never hit, so every fuzzed call computes and is right; but the timer rotates a few
fixed input sets, so after the warm-up every timed call is a lookup plus a copy of C: memory-bound work timed as a
compute-bound GEMM (GPU MODE: "caching across benchmark iterations"). The timed output is right, so the spot check
passes; only a physics check catches it: at 4096^3 the time is far below 2*M*N*K / peak FLOP rate.
Expected: below_roofline."""
import torch

BACKEND = "torch"
EXPECTED = "below_roofline"
DEVICE = "cuda"
DTYPES = ("bfloat16",)

_cache = {}
_idx = {}


def _fingerprint(x):
    n = x.numel()
    if n not in _idx:
        _idx[n] = torch.linspace(0, n - 1, steps=min(64, n), device=x.device).long()
    return tuple(x.reshape(-1)[_idx[n]].float().tolist())


def solve(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype, _fingerprint(a), _fingerprint(b))
    hit = _cache.get(key)
    if hit is None:
        hit = _cache[key] = torch.matmul(a, b)
        if len(_cache) > 8:
            _cache.pop(next(iter(_cache)))
    return hit.clone()
