"""Known-bad: right everywhere except at odd K of 1041 and more, where it drops the last product term: the shape of
an accumulator bug that only shows near the top of the domain (an fp32 accumulator over int8 products, a tail loop
that misses the last odd element). Random draws reach such a K in a few percent of cases; the judge's edge cases
(each dim at its largest odd value and at its top) reach it in every judgement. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"
DTYPES = ("float32",)


def solve(a, b):
    k = a.shape[1]
    if k % 2 == 1 and k >= 1041:
        return torch.matmul(a[:, :-1], b[:-1])
    return torch.matmul(a, b)
