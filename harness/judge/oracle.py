"""The trusted side's view of one call: regenerate the inputs from the seed, compute the oracle and torch's answer.

The parent process regenerates the inputs itself rather than trusting the child's copy, so nothing the candidate
does to its inputs (or to the generator) can move the reference.
"""
from __future__ import annotations

import torch

from harness.inputs import matmul_precision
from harness.judge.check import Expected
from harness.problem import DtypeSpec, Problem


def _upcast(x):
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def expected_for(problem: Problem, inputs: tuple, spec: DtypeSpec) -> Expected:
    module = problem.module()
    with torch.no_grad():
        with matmul_precision(spec):
            torch_out = module.reference(*inputs)
        if hasattr(module, "oracle"):
            oracle = module.oracle(*inputs)       # quantized problems: the reference's own quantization, in fp64
        else:
            oracle = module.reference(*(_upcast(x) for x in inputs))
        if spec.exact:
            scale = torch.zeros((), dtype=torch.float64, device=oracle.device)
        elif hasattr(module, "error_scale"):
            scale = module.error_scale(*(_upcast(x) for x in inputs)).to(torch.float64)
        else:
            scale = oracle.abs() + oracle.abs().mean()
    return Expected(oracle=oracle, torch_out=torch_out, scale=scale.expand_as(oracle))
