"""Fused attention forward, the specification: O = softmax(Q K^T * scale [+ causal mask]) V, with grouped-query
attention.

Q is (B, Hq, Sq, D), K and V are (B, Hkv, Sk, D), all contiguous, Hq = Hkv * G (query head h reads kv head h // G);
scale = 1 / sqrt(D); O is (B, Hq, Sq, D) in the input dtype. `causal` is a Python int, 0 or 1.

Causal alignment: BOTTOM-RIGHT, as FlashAttention-2 (and torch.nn.attention.bias.causal_lower_right) define it:
query i may attend to key j iff j <= i + (Sk - Sq). The last query sees every key, which is what a query chunk
appended to a KV cache needs (decode: Sq = 1 attends to all Sk keys; chunked prefill: Sq < Sk). When Sq == Sk it is
the ordinary lower-triangular mask (the same as torch SDPA's is_causal=True, which is TOP-LEFT aligned and differs
from this one only when Sq != Sk). When Sq > Sk, the first Sq - Sk queries see no key at all: their output is
defined as ZERO (FlashAttention-2's convention: "if the row of the mask is all zero, the output will be zero"),
not the NaN that a softmax over nothing gives.

Precision: the scores and the softmax are fp32 (what every fused kernel does: FlashAttention, cuDNN, torch's math
backend for half inputs); inputs and output are in the storage dtype. The reference states that by computing in
fp32 when given bf16/fp16 (and in fp64 when the harness builds the oracle from fp64 inputs), so torch's own error,
which sets the budget, is little more than the rounding of the output. A kernel that computes the scores or the
softmax in bf16/fp16, or skips the max subtraction, fails: make_inputs puts scores in the hundreds.
"""
import math

import torch


def make_inputs(shape, dtype, seed, device):
    """Seeded inputs made on the device.

    Q: randn, every query row scaled by a power of two from {2**-3, 1, 2**2, 2**3}: flat attention rows (small
    scores: the sum over all keys matters) next to peaked ones.
    K: randn plus a mean vector mu = m * randn(D) shared by the keys of one (batch, kv head), m from {0, 1, 8}.
    Real keys have such a shared direction; here it puts a large, nearly row-constant offset q.mu*scale (std 64,
    so up to ~+-200, at 2**3 query rows) under scores that differ by std 8 between keys. The max subtraction takes
    the offset out exactly in fp32; exp without it overflows (> 88.7), and scores rounded to bf16/fp16 (spacing
    0.5-1 / 1/16-1/8 at 100-200) blur the differences that decide the softmax.
    V: randn with every key row scaled by a power of two in 2**[-2, 2] (so which keys win matters to the output)."""
    B, Hkv, G, Sq, Sk, D = (shape[d] for d in ("B", "Hkv", "G", "Sq", "Sk", "D"))
    Hq = Hkv * G
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(B, Hq, Sq, D, generator=g, device=device)
    row_scales = torch.tensor([0.125, 1.0, 4.0, 8.0], device=device)
    q = q * row_scales[torch.randint(0, 4, (B, Hq, Sq, 1), generator=g, device=device)]
    mean_norms = torch.tensor([0.0, 1.0, 8.0], device=device)
    mu = torch.randn(B, Hkv, 1, D, generator=g, device=device)
    mu = mu * mean_norms[torch.randint(0, 3, (B, Hkv, 1, 1), generator=g, device=device)]
    k = torch.randn(B, Hkv, Sk, D, generator=g, device=device) + mu
    v = torch.randn(B, Hkv, Sk, D, generator=g, device=device)
    v = v * torch.exp2(torch.randint(-2, 3, (B, Hkv, Sk, 1), generator=g, device=device).float())
    causal = int(shape["causal"])
    return q.to(dtype).contiguous(), k.to(dtype).contiguous(), v.to(dtype).contiguous(), causal


def _probabilities(q, k, causal):
    """softmax(Q K^T * scale [+ bottom-right causal mask]) in q's dtype, with rows that see no key set to zero."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)                      # kv head h // group serves query head h
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if not causal:
        return torch.softmax(s, dim=-1)
    sq, sk = q.shape[-2], k.shape[-2]
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    allowed = j <= i + (sk - sq)                               # bottom-right aligned
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    return p.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)   # rows with no key: zero, not NaN


def reference(q, k, v, causal):
    work = torch.promote_types(q.dtype, torch.float32)        # fp32 for bf16/fp16, fp64 for the oracle
    p = _probabilities(q.to(work), k.to(work), causal)
    group = q.shape[1] // v.shape[1]
    return torch.matmul(p, v.to(work).repeat_interleave(group, dim=1)).to(q.dtype)


def error_scale(q, k, v, causal):
    """Per-element magnitude an honest kernel's error scales with: sum_j p_ij |v_jd|.

    A fused kernel (FlashAttention-2 and its kind) rounds the unnormalized probabilities to the input dtype before
    the P V product, a relative error of at most u/2 on each p_ij, so |O - oracle| <= u/2 * sum_j p_ij |v_jd| plus
    the output's own rounding u/2 * |O| (the checker adds |oracle| to this scale). fp32 accumulation adds a
    negligible amount. The scores' own error is left out on purpose: computed in fp32 it is the rounding of a
    D-term fp32 dot product, ~1e-5 absolute at |s| ~ 100 here (measured), a relative error of 1e-5 on p, under 5%
    of fp16's u; a term like |v| * |s| * u would have budgeted (and so allowed) scores rounded to bf16/fp16, the bug
    these inputs are made to catch. Fully masked rows get scale 0 (their output must be exactly 0). Called on
    float64 inputs.

    Below fp16's normal range the rounding of a probability is absolute, not relative: an unnormalized p~ = exp(s -
    m) < 2**-14 is an fp16 subnormal, off by up to 2**-25, which is u/2 (2**-12) times 2**-13 / l = 2**-13 * max_j
    p_ij. So each visible key counts at least that much. Measured on an H100 without this term: fp16 SDPA (torch's
    own) and the shipped triton_flash were off by 2-4 subnormal steps on rows with few keys (Sk = 3, 5) whose
    outputs are themselves subnormal. Masked keys stay 0 (an honest kernel's exp(-inf) is exactly 0)."""
    p = _probabilities(q, k, causal)
    group = q.shape[1] // v.shape[1]
    floor = 2.0**-13 * p.amax(dim=-1, keepdim=True)
    p = torch.where(p > 0, torch.maximum(p, floor), p)
    return torch.matmul(p, v.abs().repeat_interleave(group, dim=1))


def negative_controls():
    """Wrong kernels the checker must reject (besides the generic zeros / pass-through / lower-precision ones)."""

    def no_max_subtraction(q, k, v, causal):
        # softmax as exp(s) / sum exp(s) in fp32, no running max: exp overflows on the large-logit rows.
        group = q.shape[1] // k.shape[1]
        kf, vf = (x.float().repeat_interleave(group, dim=1) for x in (k, v))
        s = torch.matmul(q.float(), kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            sq, sk = s.shape[-2:]
            allowed = torch.arange(sk)[None, :] <= torch.arange(sq)[:, None] + (sk - sq)
            s = s.masked_fill(~allowed, float("-inf"))
        e = torch.exp(s)
        return torch.matmul(e / e.sum(-1, keepdim=True), vf).to(q.dtype)

    def scores_in_input_dtype(q, k, v, causal):
        # Eager attention without upcasting: Q K^T and the scale in bf16/fp16, then an fp32 softmax and P V.
        group = q.shape[1] // k.shape[1]
        s = torch.matmul(q, k.repeat_interleave(group, dim=1).transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        if causal:
            sq, sk = s.shape[-2:]
            allowed = torch.arange(sk)[None, :] <= torch.arange(sq)[:, None] + (sk - sq)
            s = s.masked_fill(~allowed, float("-inf"))
        p = torch.softmax(s.float(), dim=-1)
        return torch.matmul(p, v.float().repeat_interleave(group, dim=1)).to(q.dtype)

    return {"no_max_subtraction": no_max_subtraction, "scores_in_input_dtype": scores_in_input_dtype}
