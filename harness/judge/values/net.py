"""The float32 net: one fixed, moderately large random case per float32 judgement, judged by its error statistics.

Why: float32 admits true fp32 products summed in fp32 or wider, in any order (gauntlet.judge.values.check). bf16x3
(three bf16 products over a hi/lo split of each operand) makes each product about 2**-16 wrong relative to itself,
256 times fp32's unit roundoff; the random cases' budget (k_norm x torch's error + floor u, sized for any order at
any shape, tiny ones included) lets it through, and the exact-arithmetic cases catch it only when it does not
recognise them (a candidate can: their operands are sparse or short). Here the shape is the problem's `net_case`
(K in the thousand or so) and the inputs are random, and over thousands of elements the norm-wise error is a
statistic, not a draw: honest orders stay near torch's own error, bf16x3 lands about an order of magnitude above.

The budget on that case: ||out - oracle|| <= NET_K x ||torch - oracle|| + NET_FLOOR x 2**-24 x ||scale||, scale the
problem's error scale plus |oracle| (as check.py). Measured on the CPU at gemm 64 x 96 x 1024, 9 random calls in
every magnitude mode, in units of 2**-24 ||scale||: torch 1.2-2.4, the Triton interpreter's tiled kernel 0.9-1.3,
split-K (8) 1.3-2.0, reversed K 1.6-2.4, pairwise 0.8, one fp32 FMA chain (the least accurate honest order) 3.0-5.5,
fp64 accumulation 0.2; bf16x3 36-41 (16-30 times torch's error). NET_K = 4 and NET_FLOOR = 12 admit the FMA chain
even against a torch far more accurate than the CPU's (the floor alone holds it), and reject bf16x3 by a factor of
two or more at any torch accuracy (tests/test_net.py).
"""
from __future__ import annotations

import torch

from ...reasons import Reason

NET_K = 4.0
NET_FLOOR = 12.0
_U32 = 2.0**-24


def applies(problem, device: str, shape: dict, spec, exact_case: bool) -> bool:
    """The call is at the problem's net case for this device, under true float32 (not TF32), on random inputs."""
    return (spec.torch == "float32" and not spec.tf32 and not spec.exact and not exact_case
            and problem.net_case.get(device) == shape)


def reasons(out: torch.Tensor, expected) -> list[Reason]:
    """[mismatch] when the output's norm-wise error is over the net's budget, else []."""
    oracle = expected.oracle.to(torch.float64)
    finite = torch.isfinite(oracle)
    err = torch.where(finite, out.to(oracle.device, torch.float64) - oracle, 0)
    theirs = torch.where(finite, expected.torch_out.to(oracle.device, torch.float64) - oracle, 0)
    scale = torch.where(finite, expected.scale.to(torch.float64) + oracle.abs(), 0)
    got, torch_err, unit = (float(torch.linalg.vector_norm(x)) for x in (err, theirs, _U32 * scale))
    budget = NET_K * torch_err + NET_FLOOR * unit
    if got <= budget:
        return []
    return [Reason("mismatch", (
        f"float32 net case: norm-wise error {got:.3e} is {got / max(torch_err, 1e-300):.1f} x torch's own fp32 "
        f"error and {got / max(unit, 1e-300):.1f} u of the error scale; true fp32 products summed in any order stay "
        f"within {NET_K:g} x torch's + {NET_FLOOR:g} u (budget {budget:.3e}). Products with fewer bits than fp32's "
        "(bf16x3, TF32 or fp16 operands) land here"))]
