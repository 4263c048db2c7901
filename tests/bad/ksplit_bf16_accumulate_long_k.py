"""Known-bad on the CUDA domain: split-K with a bfloat16 running sum (each K-chunk of 64 in fp32, the total rounded
to bfloat16 after every chunk), the same code as bad/ksplit_bf16_accumulate_short_k.py, replayed at K = 9000 (inside
the CUDA fuzz domain, K up to 9000), with 141 bf16 roundings of the running sum (before issue 9's per-element
budget, this K range was the only one where it failed: 1.4-1.5x the old budget). The corpus test replays that case
(CASE) on the CPU, where the arithmetic is the same. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"
DTYPES = ("bfloat16",)
CASE = "M=256,N=256,K=9000,seed=1"
CHUNK = 64


def solve(a, b):
    M, K = a.shape
    acc = torch.zeros(M, b.shape[1], dtype=a.dtype, device=a.device)
    for k0 in range(0, K, CHUNK):
        part = torch.matmul(a[:, k0:k0 + CHUNK].float(), b[k0:k0 + CHUNK].float())
        acc = (acc.float() + part).to(a.dtype)
    return acc
