"""Known-bad: a zeros "kernel" that declares DTYPES = ("bfloat16",) and is asked for float32 (`gauntlet eval ...
--dtype float32`, or a plugin/CI run of that dtype): the dtype asked for is outside its DTYPES, so nothing is judged.
That used to be a `pass` with exit 0 for a file that computes nothing; it is `nothing_judged` now (judged on
bfloat16 it is a plain mismatch). Expected: nothing_judged."""
import torch

BACKEND = "torch"
DTYPES = ("bfloat16",)


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
