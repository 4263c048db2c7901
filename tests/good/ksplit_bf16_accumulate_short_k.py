"""Known-good on the CPU domain, unusual: split-K with a bfloat16 running sum: each K-chunk of 64 is multiplied in
fp32, and the running total is rounded back to bfloat16 after every chunk (a kernel that keeps its accumulator in
the output dtype between K-tiles, or a split-K reduction done in bf16). Every chunk boundary adds a bf16 rounding,
so the error grows like sqrt(K/64) times torch's (which rounds once). Measured against the checker: for K <= 1100
(the CPU fuzz domain, at most 18 chunks) the worst element uses <= 0.6 of its budget and the norm <= 0.3, so it
honestly passes; at K = 4096-9000 (the CUDA fuzz domain) the element-wise error is 1.4-1.5x the budget and it fails
-- see bad/ksplit_bf16_accumulate_long_k.py, which replays such a case. Expected: pass."""
import torch

BACKEND = "torch"
EXPECTED = "pass"
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
