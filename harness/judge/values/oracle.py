"""The trusted side's view of one call: regenerate the inputs from the seed, compute the oracle and torch's answer.

The parent process regenerates the inputs itself rather than trusting the child's copy, so nothing the candidate
does to its inputs (or to the generator) can move the reference. A quantized problem that admits several ways of
computing its quantized values (CONVENTIONS in reference.py) gets one expectation per convention, the others built
only when needed (harness/judge/values/conventions.py).
"""
from __future__ import annotations

import functools

import torch

from ...inputs import matmul_precision
from . import conventions
from .check import Expected
from ...problem import DtypeSpec, Problem


def _upcast(x):
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def expected_for(problem: Problem, inputs: tuple, spec: DtypeSpec) -> Expected:
    module = problem.module()
    names = conventions.declared(module)
    if not names:
        expected = _expected(module, inputs, spec)
        if getattr(inputs, "mode", None) == "exact" and not spec.tf32:
            expected.exact_case = _is_exact(expected)
        return expected
    stated = _expected(module, inputs, spec, names[0])
    others = tuple((name, functools.partial(_expected, module, inputs, spec, name)) for name in names[1:])
    return conventions.Admissible(oracle=stated.oracle, torch_out=stated.torch_out, scale=stated.scale,
                                  convention=names[0], others=others)


def _is_exact(expected: Expected) -> bool:
    """An exact-arithmetic case (gauntlet.inputs) holds only if the oracle is representable in the output dtype and
    torch's own answer equals it: a make_exact_inputs that is not exact must not make the judge stricter than
    torch (such a case is then judged as a random one)."""
    oracle = expected.oracle
    if not oracle.is_floating_point() or not bool(torch.isfinite(oracle).all()):
        return False
    ours = oracle.to(expected.dtype)
    return bool((ours.to(torch.float64) == oracle).all()) and bool((expected.torch_out == ours).all())


def _expected(module, inputs: tuple, spec: DtypeSpec, convention: str | None = None) -> Expected:
    """Oracle, torch's answer and the error scale, all under one convention (None: a problem without any)."""
    kw = {} if convention is None else {"convention": convention}
    with torch.no_grad():
        with matmul_precision(spec):
            torch_out = module.reference(*inputs, **kw)
        if hasattr(module, "oracle"):
            oracle = module.oracle(*inputs, **kw)   # quantized problems: the reference's own quantization, in fp64
        else:
            oracle = module.reference(*(_upcast(x) for x in inputs), **kw)
        if spec.exact:
            scale = torch.zeros((), dtype=torch.float64, device=oracle.device)
        elif hasattr(module, "error_scale"):
            scale = module.error_scale(*(_upcast(x) for x in inputs), **kw).to(torch.float64)
        else:
            scale = oracle.abs() + oracle.abs().mean()
    return Expected(oracle=oracle, torch_out=torch_out, scale=scale.expand_as(oracle))
