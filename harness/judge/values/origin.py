"""Whose arithmetic is the output? A cross-check from the values themselves, for a non-torch backend: an output
bit-identical to torch's own result, at a case where no other way of summing could be, is torch's library's work,
whatever the worker's reply says ran.

Why: the profiler's account of a call (its aten ops on the CPU, its kernel names on the GPU) is gathered inside the
candidate's process and sent in a reply the candidate can rewrite (wrap the function that serializes it, drop
`aten::mm` and the tampering fields). The output is different: the judge compares it with torch's own result, which it
computes itself on its own inputs for the tolerance (gauntlet.judge.values.oracle). Floating-point sums round after
every addition, so two different orders of the same sum differ in the last bits of most elements once rounding is
present; an output equal to torch's in every bit at such a case came from torch's own order, i.e. its library.

Where the rule is sound, and only there it is applied:
- float32 and float64 outputs (16-bit outputs round the fp32 accumulator once at the end, which hides the order);
- random cases, never exact-arithmetic ones (every order gives the one exact answer there);
- at least MIN_ELEMENTS elements, and torch's result differs from the correctly rounded oracle in at least MOST of
  them: rounding is present (short sums, tiny outputs and copies are exact or nearly);
- torch's result differs from the plainest order (one fp32 accumulator per output, k in order, fused multiply-adds:
  the problem's `sequential_order`, computed by the judge) in at least MOST of the elements too. torch's own kernel IS
  that order where its K blocking does not split the sum (the CPU's sgemm up to K = 128 or so; a GPU's FFMA kernels
  without split-K, likely everywhere): a naive kernel would match torch bit for bit there, honestly. Problems with
  no `sequential_order` are not checked.
What stays out of reach: a candidate whose own order happens to be exactly the library's at the case (the same K
blocking and the same partial-sum order), which this would call torch's; and a library result perturbed in a few
last bits on purpose, which no longer matches (it is then judged by the tolerance alone: a forged reply plus a
perturbed library result passes on the CPU, where only the reply names the ops). The checks are ordered so that an
output that is not bit-identical, every honest one in practice, costs one comparison.
"""
from __future__ import annotations

import torch

from .check import round_to
from ...reasons import Reason

MIN_ELEMENTS = 256
MOST = 0.5
_BITS = {torch.float32: torch.int32, torch.float64: torch.int64}


def library_reasons(out: torch.Tensor, expected, exact_case: bool, control) -> list[Reason]:
    """[forbidden_op] when `out` is torch's own result bit for bit where the rule above holds, else []. `control` is a
    no-argument callable giving the plainest-order result on the judge's inputs (None: the problem has none)."""
    theirs = expected.torch_out
    if (control is None or exact_case or out.dtype not in _BITS or theirs.dtype != out.dtype
            or tuple(out.shape) != tuple(theirs.shape) or out.numel() < MIN_ELEMENTS):
        return []
    bits = _BITS[out.dtype]
    theirs = theirs.to(out.device).contiguous()
    if not torch.equal(out.contiguous().view(bits), theirs.view(bits)):
        return []
    rounding = float((theirs.to(torch.float64) != round_to(expected.oracle, out.dtype).to(theirs.device))
                     .double().mean())
    if rounding < MOST:
        return []
    plain = control()
    if not isinstance(plain, torch.Tensor) or plain.dtype != out.dtype or plain.shape != theirs.shape:
        return []
    differs = float((plain.to(theirs.device).contiguous().view(bits) != theirs.view(bits)).double().mean())
    if differs < MOST:
        return []
    return [Reason("forbidden_op", (
        f"output bit-identical to torch's own result in all {out.numel()} elements, at a case where any other "
        f"summation order differs: torch's result differs from the correctly rounded answer in {rounding:.0%} of "
        f"them and from the plainest fp32 order in {differs:.0%}. The work was torch's library's, whatever the "
        "worker reported as run"))]
