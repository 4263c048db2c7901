"""Known-bad: shape-specialised: right only on the benchmark-like shapes (every dim a multiple of 128, as in
4096x4096x4096 or 128x14336x4096), where K needs no tail; elsewhere the K loop silently drops the K % 128 tail (a
kernel whose tail handling was never written, tuned and tested only on the shapes that are timed). The fuzzer draws
primes and tile sizes +- 1. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"


def solve(a, b):
    K = a.shape[1]
    k_main = K - K % 128
    if k_main == 0:
        return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    return torch.matmul(a[:, :k_main], b[:k_main])
