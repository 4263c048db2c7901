"""The baseline: what eager attention code writes (Hugging Face's `repeat_kv` + `torch.matmul`), i.e. cuBLAS
batched GEMM on V expanded to the query heads, in the input dtype."""
import torch

BACKEND = "torch"


def _repeat_kv(x, group):
    """(B, Hkv, S, D) -> (B, Hkv * group, S, D): kv head h // group serves query head h (a copy, as repeat_kv makes)."""
    if group == 1:
        return x
    b, hkv, s, d = x.shape
    return x[:, :, None].expand(b, hkv, group, s, d).reshape(b, hkv * group, s, d)


def solve(p, v):
    return torch.matmul(p, _repeat_kv(v, p.shape[1] // v.shape[1]))
