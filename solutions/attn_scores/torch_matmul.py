"""The baseline: what eager attention code writes (Hugging Face's `repeat_kv` + `torch.matmul` + scale), i.e.
cuBLAS batched GEMM on K expanded to the query heads, then an elementwise scale, in the input dtype."""
import math

import torch

BACKEND = "torch"


def _repeat_kv(x, group):
    """(B, Hkv, S, D) -> (B, Hkv * group, S, D): kv head h // group serves query head h (a copy, as repeat_kv makes)."""
    if group == 1:
        return x
    b, hkv, s, d = x.shape
    return x[:, :, None].expand(b, hkv, group, s, d).reshape(b, hkv * group, s, d)


def solve(q, k):
    k = _repeat_kv(k, q.shape[1] // k.shape[1])
    return torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(q.shape[-1]))
