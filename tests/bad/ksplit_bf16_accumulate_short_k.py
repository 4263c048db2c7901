"""Known-bad on the CPU domain: split-K with a bfloat16 running sum: each K-chunk of 64 is multiplied in fp32, and
the running total is rounded back to bfloat16 after every chunk (a kernel that keeps its accumulator in the output
dtype between K-tiles, or a split-K reduction done in bf16). Every chunk boundary adds a bf16 rounding of the
partial sum, an error as large as a whole product term once K passes a few hundred, so the element-wise rule (the
oracle moved by fp32-sized errors, then rounded ONCE to the output: harness/judge/values/check.py) rejects it from the
second chunk on: measured on 64x64 outputs, 8% of elements outside at K = 65, 18% at K = 130, 27% at K = 300, 52%
at K = 1100 (3 seeds each, all rejected). Split-K with fp32 partials passes (tests/test_budget.py). Until the
element-wise budget was derived per element (issue 9), this file passed on the CPU domain, inside k times torch's
worst error. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"
DTYPES = ("bfloat16",)
CHUNK = 64


def solve(a, b):
    M, K = a.shape
    acc = torch.zeros(M, b.shape[1], dtype=a.dtype, device=a.device)
    for k0 in range(0, K, CHUNK):
        part = torch.matmul(a[:, k0:k0 + CHUNK].float(), b[k0:k0 + CHUNK].float())
        acc = (acc.float() + part).to(a.dtype)
    return acc
