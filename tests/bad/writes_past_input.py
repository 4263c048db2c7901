"""Known-bad: a correct answer, plus a write one element past the end of input A (an off-by-one store that only
touches memory beside the input). The guard band after A holds poison; the write changes it.

Expected: out_of_bounds_write."""
import torch

BACKEND = "torch"
EXPECTED = "out_of_bounds_write"


def solve(a, b):
    c = a @ b
    a.as_strided((1,), (1,), a.storage_offset() + a.numel()).fill_(0.0)
    return c
