"""What both sides need to make a call's inputs: regenerate them from a seed, under the dtype's matmul precision.

Shared by the parent (which regenerates every input itself to judge) and the children (which regenerate them to
call solve): neither trusts the other's copy.

Magnitudes across the exponent range (float32 and tf32 dtypes). A problem's make_inputs draws values of moderate
size, inside fp16's range, so "fp32" or "tf32" computed with fp16 operands (the same 10 stored mantissa bits as
TF32, and faster) would pass every case. So each call's seed also picks how its inputs are scaled, in the harness,
for every problem at once (`magnitude_mode`, out of 12):
- 3 `as_made`: the problem's own values;
- 2 `huge`: each float input times its own 2**s, s in [20, 40] (fp16 overflows at 2**16: inf, then NaN);
- 2 `tiny`: each float input times 2**-s, s in [24, 34] (fp16's smallest subnormal is 2**-24: zeros);
- 2 (5 where `exact` is not offered) `spread`: each row (slices along dim -2) times its own 2**e, e in
  {-30, -15, 0, 15, 30}: 60 binades in one tensor, more than fp16 holds even after scaling the whole tensor;
- 3 `exact` (float32 only, where reference.py defines `make_exact_inputs`): inputs whose every product and every
  partial sum is exactly representable in fp32 (operands with up to 20 significant bits, few nonzero terms per
  output), so true fp32 arithmetic in any order gives the exact result and the judge asks for it
  (gauntlet.judge.values.oracle): bf16 (8 bits, so also bf16x3 splits of 16 bits), TF32 and fp16 operands show at once.
bf16 shares fp32's exponent range: only its mantissa tells it apart, which the `exact` cases test.
Scaling by powers of two is exact (no product or sum leaves fp32's normal range: |C| stays under 2**100 and above
2**-90), so the fp64 oracle, the error scale and every tolerance move with the values and stay right
(tests/test_budget.py and tests/test_net.py check both sides). The problems' own values almost never catch fp16 or
bf16 operands; the scaled and exact modes catch them in most calls, and honest fp32 and TF32 orders in none
(tests/bad/tf32_via_fp16_operands.py, tf32_via_scaled_fp16_operands.py, fp32_via_three_bf16.py; the rates are in
docs/benchmarks.md, "Figures moved from docstrings").
"""
from __future__ import annotations

import contextlib
import random

import torch

from .problem import DtypeSpec, Problem

@contextlib.contextmanager
def matmul_precision(spec: DtypeSpec):
    """float32 means true fp32; the `tf32` dtype entry is where TF32 is allowed. Solutions read
    torch.get_float32_matmul_precision() to know which one they are being judged on."""
    before = torch.get_float32_matmul_precision()
    cudnn_before = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high" if spec.tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = spec.tf32
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
        torch.backends.cudnn.allow_tf32 = cudnn_before


class CaseInputs(tuple):
    """A call's inputs, and the magnitude mode they were made under (the oracle asks exact cases for exact
    answers)."""
    mode: str = "as_made"

    def __new__(cls, items, mode: str = "as_made"):
        self = super().__new__(cls, items)
        self.mode = mode
        return self


# (mode, weight out of 12): see the module docstring.
MODES = (("as_made", 3), ("exact", 3), ("huge", 2), ("tiny", 2), ("spread", 2))
SPREAD_EXPONENTS = (-30, -15, 0, 15, 30)


def _rng(seed: int, salt: int) -> random.Random:
    return random.Random((int(seed) * 0x9E3779B1 + salt) % 2**61)


def magnitude_mode(problem: Problem, spec: DtypeSpec, seed: int) -> str:
    """How a call's inputs are scaled, picked from its seed (so parent and child agree): float32 storage only."""
    if spec.torch != "float32":
        return "as_made"
    r = _rng(seed, 1).randrange(sum(w for _, w in MODES))
    for mode, weight in MODES:
        if r < weight:
            break
        r -= weight
    if mode == "exact" and (spec.tf32 or not callable(getattr(problem.module(), "make_exact_inputs", None))):
        mode = "spread"          # TF32 rounds its inputs: nothing past 11 bits is exact there
    return mode


def make_inputs(problem: Problem, shape: dict, spec: DtypeSpec, seed: int, device: str) -> tuple:
    mode = magnitude_mode(problem, spec, seed)
    module = problem.module()
    make = module.make_exact_inputs if mode == "exact" else module.make_inputs
    inputs = make(dict(shape), spec.torch_dtype(), int(seed), device)
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if mode in ("huge", "tiny", "spread"):
        rng = _rng(seed, 2)
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.dtype == torch.float32 and x.numel():
                _rescale(x, mode, rng)
    return CaseInputs(inputs, mode)


def _rescale(x: torch.Tensor, mode: str, rng: random.Random) -> None:
    """Multiply x in place (its strides kept: a transposed view stays one) by powers of two: exact."""
    with torch.no_grad():
        if mode == "huge":
            x.mul_(2.0 ** rng.randint(20, 40))
        elif mode == "tiny":
            x.mul_(2.0 ** -rng.randint(24, 34))
        elif x.dim() == 0:
            x.mul_(2.0 ** rng.choice(SPREAD_EXPONENTS))
        else:
            dim = x.dim() - 2 if x.dim() >= 2 else 0
            g = torch.Generator().manual_seed(rng.randrange(2**31))
            picks = torch.randint(0, len(SPREAD_EXPONENTS), (x.shape[dim],), generator=g)
            factors = torch.exp2(torch.tensor(SPREAD_EXPONENTS, dtype=torch.float32)[picks]).to(x.device)
            x.mul_(factors.reshape([-1] + [1] * (x.dim() - 1 - dim)))


# Exact-arithmetic operands (significant bits of A, of B, nonzero products per output): the sum of |products| stays
# under 2**23, so every partial sum is exact in fp32. 20 and 18 bits are past bf16x3's 16 (and TF32's and fp16's
# 11); 11 x 11 bits are exact in a bf16 hi/lo split but its dropped lo*lo product is not.
EXACT_RECIPES = ((20, 1, 4), (18, 2, 4), (11, 11, 2))


def exact_matmul_operands(lead, M, N, K, g, device):
    """The operands of a problem's `make_exact_inputs` (gemm, gemm_layouts, bmm: one maker for every matmul-shaped
    problem). float32 A (*lead, M, K) and B (*lead, K, N) whose every product and partial sum is exact in fp32: A
    dense with integers below 2**bits, B with at most `terms` nonzero integers below 2**b_bits per column (at
    random rows), then scaled by powers of two (rows of A, columns of B in 2**[-3, 3]), which keeps them exact.
    Nothing larger than the operands themselves is made at once (_sparse_columns)."""
    bits, b_bits, terms = EXACT_RECIPES[int(torch.randint(0, len(EXACT_RECIPES), (1,), generator=g,
                                                           device=device))]
    a = torch.randint(1 - 2**bits, 2**bits, (*lead, M, K), generator=g, device=device, dtype=torch.int32).float()
    b = _sparse_columns(lead, K, N, terms, b_bits, g, device)
    row = torch.exp2(torch.randint(-3, 4, (*lead, M, 1), generator=g, device=device).float())
    col = torch.exp2(torch.randint(-3, 4, (*lead, 1, N), generator=g, device=device).float())
    return a * row * 2.0**-bits, b * col * 2.0**-b_bits


KEY_SLAB = 1 << 25          # random keys drawn at once by _sparse_columns (128 MiB of float32)


def _sparse_columns(lead, K, N, terms, b_bits, g, device):
    """B (*lead, K, N): in each column, `terms` rows picked at random (the largest of K random keys) hold nonzero
    integers below 2**b_bits with random signs; the rest is zero. Made a slab of columns at a time, so the keys and
    their top-k never take more than KEY_SLAB elements beside B. (Keys for all of B and two int64 argsorts of them
    take about six times B's own size: enough to run a worker out of memory on bmm's largest cases.)"""
    b = torch.zeros(*lead, K, N, device=device)
    if b.numel() == 0:
        return b
    k = min(terms, K)
    per = max(1, KEY_SLAB // max(1, b.numel() // N))
    for start in range(0, N, per):
        cols = min(per, N - start)
        keys = torch.rand(*lead, K, cols, generator=g, device=device)
        rows = keys.topk(k, dim=-2).indices
        del keys
        mag = torch.randint(1, 2**b_bits, rows.shape, generator=g, device=device).float()
        sign = torch.where(torch.rand(rows.shape, generator=g, device=device) < 0.5, -1.0, 1.0)
        b[..., start:start + cols].scatter_(-2, rows, mag * sign)
    return b


def fma_chain_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float32 A (..., M, K) @ B (..., K, N) in the plainest order: each output one fp32 accumulator, starting at 0,
    updated by a fused multiply-add for k = 0, 1, ..., K-1 (what a naive kernel does, and what a library's FFMA
    kernel does within a K block). Each step is exact in float64 (a float32 product has at most 48 bits) and then
    rounded once to float32: the fused step, except where the float64 sum itself rounds onto a float32 tie (about
    one step in 2**29). The judge's control for gauntlet.judge.values.origin (problems name it `sequential_order`)."""
    acc = torch.zeros((*torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]),
                      dtype=torch.float32, device=a.device)
    for k in range(a.shape[-1]):
        acc = (acc.double() + a[..., k:k + 1].double() * b[..., k:k + 1, :].double()).float()
    return acc
