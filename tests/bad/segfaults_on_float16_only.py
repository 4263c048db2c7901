"""Known-bad: right in float32, kills its own process (SIGSEGV) on the first float16 call. The float16 crash must
cost float16 only: float32 is judged afterwards in a fresh process and passes (tests/test_bad_solutions.py checks
both). Expected: crash."""
import ctypes

import torch

BACKEND = "torch"
EXPECTED = "crash"
DEVICE = "cpu"
DTYPES = ("float16", "float32")


def solve(a, b):
    if a.dtype == torch.float16:
        ctypes.string_at(0)
    return torch.matmul(a, b)
