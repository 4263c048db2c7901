"""Attention scores, the specification: S = Q @ K^T * scale, batched over heads, with grouped-query attention.

Q is (B, Hq, Sq, D) and K is (B, Hkv, Sk, D), both contiguous, with Hq = Hkv * G: query head h reads kv head
h // G (the G query heads of a group share one K, as in Llama-3's GQA; G = 1 is plain multi-head attention).
The output S is (B, Hq, Sq, Sk) in the input dtype; scale = 1 / sqrt(D). Accumulation is meant to be fp32 (tensor
cores): the harness runs this reference in float64 as the oracle and in the input dtype to learn torch's own error.
The problem's dims name the group size G rather than Hq, so every drawn shape is a valid GQA shape.
"""
import math

import torch


def _pow2(g, shape, lo, hi, device):
    return torch.exp2(torch.randint(lo, hi + 1, shape, generator=g, device=device).float())


def make_inputs(shape, dtype, seed, device):
    """Seeded inputs made on the device. randn, with every query row and every key row scaled by its own power of
    two in 2**[-3, 3] (rows of very different magnitude: a kernel that mixes up rows, heads or the GQA mapping, or
    loses precision on small rows, shows it), and a few feature columns of Q and K scaled by 2**2, the outlier
    features real models have. |S| stays in the hundreds, far from fp16's 65504."""
    B, Hkv, G, Sq, Sk, D = (shape[d] for d in ("B", "Hkv", "G", "Sq", "Sk", "D"))
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(B, Hkv * G, Sq, D, generator=g, device=device)
    k = torch.randn(B, Hkv, Sk, D, generator=g, device=device)
    q = q * _pow2(g, (B, Hkv * G, Sq, 1), -3, 3, device) * _pow2(g, (1, 1, 1, D), 0, 2, device)
    k = k * _pow2(g, (B, Hkv, Sk, 1), -3, 3, device)
    return q.to(dtype).contiguous(), k.to(dtype).contiguous()


def reference(q, k):
    """What eager attention code writes (Hugging Face's repeat_kv + matmul): expand K to the query heads, then
    one batched matmul and a scale."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)          # kv head h // group serves query head h
    return torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))


def rows(index, q, k):
    """The inputs whose reference is rows `index` (dim -2) of this call's: the judge checks a few sampled rows of
    every timed output against the oracle of just those rows (gauntlet.judge.values.sampled)."""
    return q[..., index, :], k


def factors(q, k):
    """(X, Y) in float64 with the oracle = X @ Y: the judge checks every timed output with a random projection,
    r^T C against (r^T X) Y (Freivalds; gauntlet.judge.values.sampled)."""
    group = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(group, dim=1)
    return q.double() * (1.0 / math.sqrt(q.shape[-1])), k.transpose(-1, -2)


def error_scale(q, k):
    """Per-element magnitude rounding error scales with: scale * sqrt(sum_d (q_d k_d)^2), the root-sum-square of the
    D products summed into S_ij (a GEMM's scale, as in problems/gemm). Rounding errors of random sign add in
    quadrature; |q| @ |k| would grow like D and let a lower-precision kernel through. Called on float64 inputs."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    return torch.matmul(q * q, (k * k).transpose(-1, -2)).sqrt() * (1.0 / math.sqrt(q.shape[-1]))
