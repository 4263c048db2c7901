"""Correctness against an fp64 oracle: a norm-wise budget set by torch's own error, an element-wise one derived.

Norm-wise (quack's rule, adopted by Liger): the candidate may be at most k_norm times as wrong as torch's own op in
the same precision on the same inputs, both measured against the float64 oracle, plus a floor for where torch
happens to be exact:
    ||out - oracle|| <= k_norm * ||torch - oracle|| + floor * u * ||scale||,
with u the dtype's unit roundoff and scale_i = error_scale_i + |oracle_i| (the problem's error scale, e.g. the
root-sum-square of the products for GEMM, plus the value itself for rounding relative to it).

Element-wise, per element and without reference to any other element: an honest kernel computes the value with
some error a_i in a wider format (fp32 accumulators, fp32 epilogues) and then rounds once to the output dtype. So
its answer lies in the interval
    [RN(oracle_i - a_i), RN(oracle_i + a_i)],       a_i = (k_elem * u + k_acc * 2**-24) * scale_i,
where RN rounds to the output dtype exactly as the hardware does (nearest, ties to even, subnormals and the
binade edges included, overflow to inf). The two terms of a_i:
- k_acc * 2**-24: fp32 accumulation in any order (split-K with fp32 partials, other tilings, tensor cores that
  truncate while they accumulate) and fp32 epilogue arithmetic, counted in fp32's unit roundoff whatever the
  storage dtype. At the usual k_acc = 8192 that is 2**-11 of the scale, well under one 16-bit spacing, so a 16-bit
  answer must be the correctly rounded value, or its neighbour where the oracle lies that close to a midpoint;
- k_elem * u: roundings at the dtype's own precision that an honest kernel may make before the output's, where the
  problem has them (FlashAttention's probabilities rounded to bf16 before P V, an eager epilogue's intermediate
  results, TF32's rounded inputs); 0 where none is legitimate (a GEMM's 16-bit products are exact in fp32).
Each problem.yaml derives its two numbers. Torch's own answer at an element is always admitted (a sanity floor: the
judge is never stricter than torch on any one element), but it does not scale the budget of every element: with
16-bit outputs torch's worst relative error is the output rounding itself, and k times it would let an element that
missed a whole product term through at most positions (tests/test_budget.py measures both sides).
NaN/Inf positions must match the oracle rounded to the output dtype (overflow to inf is a legitimate answer).

What `float32` admits (a measured decision): true fp32 products (as FFMA makes them) summed in fp32 or wider, in
any order, split-K and atomics included. Not TF32, not fp16 or bf16
operands, not bf16x3 (three bf16 GEMMs over a 16-bit hi/lo split: about 2**-16 relative per product, which the
norm-wise budget, 8 x torch's error + 64 u, let through on random inputs). The random cases cannot say this: k_acc
8192 allows 2**-11 of the scale per element, to hold every summation order. So a quarter of float32 calls are
exact-arithmetic cases (gauntlet.inputs, `make_exact_inputs` in reference.py): operands with up to 20 significant
bits and at most 4 nonzero products per output, so every product and every partial sum is an integer times a
power of two below 2**24, exact in fp32 whatever the order. There the oracle is the only right answer
(`exact_case`: no allowance; torch's own answer, equal to it, is the check that the inputs are what they claim:
where it is not, the case is judged as a random one). Measured on the CPU over 9 shapes x 24 seeds of gemm
(tests/test_net.py): bf16x3 rejected in 37 of 41 exact cases (the others: 1 x 1 outputs whose few products split
exactly) against 1 of 50 random ones; fp16 and bf16 operands in all 41, TF32-rounded operands in 30 (the 11 x
11-bit recipe is exact in TF32: 20- and 18-bit operands are not); torch, split-K, reversed and blocked fp32 orders
and fp64 accumulation in none, in any mode. A candidate can recognise those cases (sparse, short operands) and
compute them in fp32, so one fixed random case per float32 judgement is judged on its error statistics as well
(gauntlet.judge.values.net), where bf16x3 lands an order of magnitude above every fp32 order.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

from ...problem import DtypeSpec
from ...reasons import Reason


@dataclass
class Expected:
    """What the trusted side computed for one call: the oracle and torch's own answer."""
    oracle: torch.Tensor          # float64 (or the exact integer result)
    torch_out: torch.Tensor       # torch's op in the candidate's precision
    scale: torch.Tensor           # per-element error scale, float64, same shape as oracle
    exact_case: bool = False      # inputs built so that true fp32 arithmetic is exact in any order (see below)

    @property
    def dtype(self):
        return self.torch_out.dtype

    @property
    def shape(self):
        return tuple(self.torch_out.shape)


def contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(list(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return strides[::-1]


def structural_reasons(meta: dict, expected: Expected, device: str, layout: str = "contiguous") -> list[Reason]:
    """Checks on what the child reported about the returned object, before looking at values. `layout` is the
    problem's `output_layout`: "contiguous" (a new row-major tensor, the default) or "any"."""
    if not meta.get("is_tensor"):
        return [Reason("not_a_tensor", f"solve returned {meta.get('type', '?')}, expected a plain torch.Tensor")]
    out = []
    want_dtype = str(expected.dtype).removeprefix("torch.")
    if meta["dtype"] != want_dtype:
        out.append(Reason("wrong_dtype", f"output dtype {meta['dtype']}, expected {want_dtype}"))
    if tuple(meta["shape"]) != expected.shape:
        out.append(Reason("wrong_shape", f"output shape {tuple(meta['shape'])}, expected {expected.shape}"))
    if meta.get("device_type") != device:
        out.append(Reason("wrong_device", f"output on {meta.get('device')}, inputs on {device}"))
    if meta.get("aliases_input"):
        out.append(Reason("output_aliases_input", f"output shares memory with input {meta['aliases_input']}"))
    if layout == "contiguous" and not out and isinstance(meta.get("stride"), list):
        # Size-1 dims may carry any stride and still be contiguous (torch's own rule).
        want = contiguous_strides(meta["shape"])
        if any(s != w and n > 1 for s, w, n in zip(meta["stride"], want, meta["shape"])):
            out.append(Reason("wrong_layout", f"output strides {tuple(meta['stride'])} for shape "
                                              f"{tuple(meta['shape'])}; the problem asks for a new contiguous "
                                              f"tensor, strides {tuple(want)}"))
    return out


def retained_reasons(meta: dict) -> list[Reason]:
    """Judged beside the values, not instead of them: a cache that returns its own tensor is also stale or wrong."""
    if meta.get("retained"):
        return [Reason("output_retained", "the output's memory is still referenced by the candidate after the call (a "
                                          "module-level buffer or cache): a caller keeping two results would see the "
                                          "first overwritten")]
    return []


# fp32's unit roundoff: the precision every problem's accumulation and epilogue are meant to run in (k_acc's unit).
FP32_UNIT_ROUNDOFF = 2.0**-24


# The comparison's float64 temporaries (the output upcast, the rounded oracle, errors, interval ends, round_to's own)
# number about fifteen per element. On the full output of a large case (bmm with K = 1 has a 4e9-element output within
# its fuzz budget) they alone would fill an 80 GB GPU, so values are compared a slab at a time: the workspace is
# bounded by CHUNK_ELEMENTS, whatever the case, and gauntlet.judge.values.memory budgets it. A slab is a run of rows
# of the outermost dim whose rows fit, one index of each dim outside it: attn_scores' (1, 32, 4096, 4096) output
# (537M elements in one leading row) is 32 slabs of one head each. Sliced by the leading dim alone it stays whole,
# and its spot check's temporaries outgrow a judge's share of the card (docs/benchmarks.md).
CHUNK_ELEMENTS = 1 << 24


def _slabs(shape) -> list[tuple[tuple, tuple]]:
    """(start, index) pairs, in index order, of at most CHUNK_ELEMENTS elements each. The slab's dim is the
    outermost whose rows fit (the last dim itself, cut along its length, if none does); `index` is a length-1 slice
    of each dim outside it (so an index within a slab keeps the output's rank), a run of rows of it, and the dims
    inside it whole; `start` is the slab's first index in the dims `index` names. The whole tensor for 0-d and empty
    outputs."""
    if len(shape) == 0 or 0 in shape:
        return [((), ...)]
    dim = 0
    while dim < len(shape) - 1 and math.prod(shape[dim + 1:]) > CHUNK_ELEMENTS:
        dim += 1
    rows = max(1, CHUNK_ELEMENTS // math.prod(shape[dim + 1:]))
    return [((*outer, j), tuple(slice(i, i + 1) for i in outer) + (slice(j, min(j + rows, shape[dim])),))
            for outer in itertools.product(*(range(n) for n in shape[:dim]))
            for j in range(0, shape[dim], rows)]


def _at(start: tuple, idx: tuple) -> tuple:
    """An index within a slab as an index of the whole output."""
    return tuple(i + (start[k] if k < len(start) else 0) for k, i in enumerate(idx))


def value_reasons(out: torch.Tensor, expected: Expected, spec: DtypeSpec) -> list[Reason]:
    """Compare values; returns [] when the output is within budget. Slab by slab (see CHUNK_ELEMENTS): the verdict
    and the report are those of the whole output (norms summed in quadrature, counts summed, the first and the
    worst element over all slabs)."""
    if spec.exact:
        return _exact_reasons(out, expected)
    shape = tuple(expected.oracle.shape)
    if tuple(out.shape) != shape:          # callers check structure first; never compare by broadcasting
        return [Reason("wrong_shape", f"output shape {tuple(out.shape)}, expected {shape}")]
    sq = {"c": 0.0, "t": 0.0, "s": 0.0}
    over_total, over_numel, worst, first, rows = 0, 0, None, None, []
    for start, sl in _slabs(shape):
        part = Expected(oracle=expected.oracle[sl], torch_out=expected.torch_out[sl], scale=expected.scale[sl],
                        exact_case=expected.exact_case)
        o = part.oracle
        out64 = out[sl].to(device=o.device, dtype=torch.float64)
        rounded = round_to(o.to(torch.float64), part.dtype)   # where the output dtype overflows, inf is right
        bad = _nonfinite_mismatch(out64, rounded, start)
        if bad:
            # Report the whole output's count for that kind, as before: the remaining slabs only add to it.
            return [Reason("nan_mismatch", _nonfinite_total(bad, out, expected, shape))]
        finite = torch.isfinite(rounded)
        del rounded
        for key, x in (("c", torch.where(finite, out64 - o, 0)),
                       ("t", torch.where(finite, part.torch_out.to(torch.float64) - o, 0)),
                       ("s", _scale(part, finite))):
            sq[key] += float(torch.linalg.vector_norm(x)) ** 2
            del x
        lo, hi = element_interval(part, spec)
        over = finite & ((out64 < lo) | (out64 > hi))
        n_over = int(over.sum())
        over_numel += over.numel()
        if n_over:
            over_total += n_over
            w = _worst(over, out64, o, lo, hi)
            if worst is None or w[0] > worst[0]:
                worst = (w[0], _at(start, w[1]), *w[2:])
            if first is None:
                first = _at(start, tuple(int(i) for i in over.nonzero()[0]))
            if over.dim() and len(rows) < 8:
                rows += [start[0] + int(i) for i in over.nonzero()[:, 0][:8]]
        del out64, finite, lo, hi, over
    reasons = []
    norm_c, norm_t, norm_s = (math.sqrt(sq[k]) for k in "cts")
    norm_budget = spec.k_norm * norm_t + spec.floor * spec.unit_roundoff * norm_s
    if not norm_c <= norm_budget:
        reasons.append(Reason("mismatch", norm_message(norm_c, norm_t, norm_s, spec)))
    if over_total:
        _, idx, got, want, lo_v, hi_v = worst
        reasons.append(Reason("mismatch", (
            f"{over_total} of {over_numel} element(s) outside the element-wise budget; worst at {idx}: off by "
            f"{_times(worst[0])} the error it may have (got {got:.8g}, expected {want:.8g}, allowed "
            f"[{lo_v:.8g}, {hi_v:.8g}] from k_elem={spec.k_elem:g}, k_acc={spec.k_acc:g}); first at {first}"
            + (f"; leading-dim indices include {sorted(set(rows))[:8]}" if rows else ""))))
    return reasons


def norm_message(norm_c: float, norm_t: float, norm_s: float, spec: DtypeSpec) -> str:
    """The norm-wise failure in words a reader can act on: how many times the budget the error is first (1.2 x is a
    near miss, 3e6 x a wrong answer), then the figures it comes from, each named. The raw figures stay in the text,
    in full, for scripts and for comparing runs."""
    tied = spec.k_norm * norm_t
    floor = spec.floor * spec.unit_roundoff * norm_s
    budget = tied + floor
    ratio = norm_c / budget if budget > 0 else math.inf
    parts = f"{spec.k_norm:g} x torch's own error {norm_t:.3e} at this precision"
    if floor > 0:
        parts += f" + a floor of {floor:.3e} ({spec.floor:g} units of roundoff of the output's scale)"
    return f"norm-wise error is {_times(ratio)} the budget ({norm_c:.3e} against {budget:.3e} = {parts})"


def _times(ratio: float) -> str:
    """A ratio as a reader compares it with 1: two significant figures (NaN: the error itself is not a number)."""
    if math.isnan(ratio):
        return "NaN x"
    return "an infinite multiple of" if math.isinf(ratio) else f"{ratio:.2g} x"


def _scale(expected: Expected, finite: torch.Tensor) -> torch.Tensor:
    """The per-element error scale: the problem's (accumulation, intermediate roundings) plus |oracle| (rounding
    relative to the value itself); zero where the rounded oracle is not finite (judged by the NaN/Inf rule)."""
    return torch.where(finite, expected.scale + expected.oracle.abs(), 0).to(torch.float64)


def allowance(expected: Expected, spec: DtypeSpec) -> torch.Tensor:
    """a_i, the error an honest kernel may make before it rounds to the output dtype (see the module docstring);
    none on an exact-arithmetic case."""
    finite = torch.isfinite(expected.oracle)
    if expected.exact_case:
        return torch.zeros_like(expected.oracle, dtype=torch.float64)
    a = (spec.k_elem * spec.unit_roundoff + spec.k_acc * FP32_UNIT_ROUNDOFF) * _scale(expected, finite)
    return torch.nan_to_num(a, nan=0.0)     # a NaN scale (a problem's bug) must not exempt the element: allow none


def element_interval(expected: Expected, spec: DtypeSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """(lo, hi), float64: per element, the representable values of the output dtype an honest kernel can return,
    [RN(oracle - a), RN(oracle + a)], widened to take in torch's own answer where that lies outside."""
    oracle = expected.oracle.to(torch.float64)
    a = allowance(expected, spec)
    lo, hi = round_to(oracle - a, expected.dtype), round_to(oracle + a, expected.dtype)
    theirs = expected.torch_out.to(device=oracle.device, dtype=torch.float64)
    known = torch.isfinite(theirs)
    return (torch.where(known, torch.minimum(lo, theirs), lo), torch.where(known, torch.maximum(hi, theirs), hi))


def round_to(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 x rounded to the nearest value of a floating `dtype` (ties to even), returned as float64: exact for
    any format narrower than float64, subnormals and overflow to inf included. Computed here rather than with
    x.to(dtype), which for bfloat16 and float16 goes through float32 on some paths and so rounds twice."""
    x = x.to(torch.float64)
    if dtype == torch.float64 or not dtype.is_floating_point:
        return x
    info = torch.finfo(dtype)
    digits = 1 - round(math.log2(info.eps))                  # significand bits, the implicit one included
    min_exp = round(math.log2(info.smallest_normal))
    _, exp = torch.frexp(x)                                  # x = m * 2**exp, 0.5 <= |m| < 1
    binade = torch.clamp(exp - 1, min=min_exp)               # below the normal range the spacing stays fixed
    spacing = torch.ldexp(torch.ones_like(x), binade - (digits - 1))
    r = torch.round(x / spacing) * spacing                   # exact: scaling by a power of two; round: ties to even
    return torch.where(torch.isfinite(x) & (r.abs() > info.max), torch.sign(r) * math.inf, r)


_NONFINITE = (("NaN", torch.isnan), ("+inf", lambda x: x == float("inf")), ("-inf", lambda x: x == float("-inf")))


def _nonfinite_mismatch(out64: torch.Tensor, rounded: torch.Tensor, start: tuple = ()):
    """(kind, index within the slab, the slab's start, got, expected) of the slab's first NaN/Inf disagreement, or
    None."""
    for name, pred in _NONFINITE:
        diff = pred(out64) != pred(rounded)
        if bool(diff.any()):
            idx = tuple(int(i) for i in diff.nonzero()[0])
            return name, idx, start, float(out64[idx]), float(rounded[idx])
    return None


def _nonfinite_total(bad, out, expected, shape) -> str:
    """The report for a NaN/Inf disagreement: its first position and how many elements disagree on that kind over
    the whole output (counted slab by slab)."""
    name, idx, first, got, want = bad
    pred = dict(_NONFINITE)[name]
    count = 0
    for start, sl in _slabs(shape):
        if start < first:
            continue                                   # slabs before the first disagreement have none of it
        o = expected.oracle[sl]
        count += int((pred(out[sl].to(device=o.device, dtype=torch.float64))
                      != pred(round_to(o.to(torch.float64), expected.dtype))).sum())
    return (f"{count} element(s) disagree on {name}; first at {_at(first, idx)}: "
            f"got {got:.6g}, expected {want:.6g}")


def _worst(over, out64, oracle, lo, hi):
    """(ratio, index, got, expected, lo, hi) of the element furthest outside, in units of its allowed error."""
    allowed = torch.maximum(hi - oracle, oracle - lo)
    ratio = ((out64 - oracle).abs() / allowed.clamp_min(torch.finfo(torch.float64).tiny)).masked_fill(~over, -1.0)
    flat = int(ratio.argmax())
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), over.shape))
    return (float(ratio.reshape(-1)[flat]), idx, float(out64[idx]), float(oracle[idx]), float(lo[idx]),
            float(hi[idx]))


def _exact_reasons(out, expected) -> list[Reason]:
    oracle = expected.oracle
    diff = out.to(oracle.device) != oracle.to(out.dtype)
    if bool(diff.any()):
        idx = tuple(int(i) for i in diff.nonzero()[0])
        return [Reason("mismatch", f"{int(diff.sum())} of {diff.numel()} element(s) differ from the exact result; "
                                   f"first at {idx}: got {out[idx].item()}, expected {oracle[idx].item()}")]
    return []


def matches(out: torch.Tensor, expected: Expected, spec: DtypeSpec) -> bool:
    """Whether an output would pass against these expectations (used to tell a stale answer from a wrong one)."""
    return tuple(out.shape) == expected.shape and not value_reasons(out, expected, spec)
