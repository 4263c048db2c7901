"""Known-bad (GPU): caches the answer keyed by the inputs' data pointers (plus shape and dtype). Fresh inputs of the
same shape are allocated at the addresses the previous call's inputs were freed from -- the CUDA caching
allocator replays the same allocation sequence the same way -- so the cache "hits" on new data and returns an
earlier call's answer. Seen on GPU MODE leaderboards as "cache by tensor identity". On the CPU, glibc's malloc
reuses addresses only now and then (measured in the worker: 1 of 7 same-shape calls got both earlier pointers
back), so the cache mostly misses and computes honestly: there the verdict is pass or stale_output depending on
luck, which is why this file is judged on the GPU only. If the device cache (which itself shifts later allocations)
never hits during fuzzing, the timing phase catches it: the timer refills its input sets in place, at the same
addresses, so timed calls get cached answers for new values, and the spot-checked timed outputs are wrong
(mismatch). Expected: stale_output."""
import torch

BACKEND = "torch"
EXPECTED = "stale_output"
ALSO_ACCEPTED = ("mismatch",)
TIMING = True
DEVICE = "cuda"
DTYPES = ("float16",)

_cache = {}


def solve(a, b):
    key = (a.data_ptr(), b.data_ptr(), tuple(a.shape), tuple(b.shape), a.dtype)
    if key not in _cache:
        _cache[key] = torch.matmul(a, b)
    return _cache[key].clone()
