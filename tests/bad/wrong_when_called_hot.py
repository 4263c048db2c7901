"""Known-bad (GPU): the converse of warm-up detection. Correct while a shape has been called only a few times in a
row (every fuzzed case: 3 calls per case, shapes change between cases), but once the same shape has been called more
than 10 times in a row -- only the timing loop does that -- it skips the K loop's second half (half the work, a 2x
"speedup"). Outputs of randomly chosen timed calls are spot-checked against the oracle. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_last = {"key": None, "streak": 0}


def solve(a, b):
    key = (tuple(a.shape), tuple(b.shape), a.dtype)
    _last["streak"] = _last["streak"] + 1 if key == _last["key"] else 1
    _last["key"] = key
    if _last["streak"] <= 10:
        return torch.matmul(a, b)
    half = max(1, a.shape[1] // 2)
    return torch.matmul(a[:, :half], b[:half])
