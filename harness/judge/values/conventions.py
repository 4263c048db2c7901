"""Quantization conventions: one recipe, several exact ways of computing it, each judged against its own oracle.

A quantized problem states a recipe (fp8 e4m3 values with amax/448 scales per row, say) and, in its reference.py, the
ways of computing the quantized values it admits: `CONVENTIONS = ("divide", "reciprocal", ...)`, the first being the
stated rule, with `reference`, `oracle` and `error_scale` (those it defines) taking a `convention` keyword. Real
libraries divide by the scale, multiply by its reciprocal, or multiply by 448/amax; these differ only where a value
lands on a rounding tie of the quantized format, and there they move one product by a whole quantization step, which no
budget sized for the output rounding can absorb (a single tie among hundreds of quantized values is enough to reject an
honest kernel). So the budget stays as it is and the judge builds one full expectation per convention instead, and
accepts an output that check.value_reasons passes against any one of them:
- the whole output against one convention, never a choice per element: what is admitted is exactly the union of
  the conventions' answers, each with the budget it had before;
- each convention's budget comes from torch's answer computed the same way: torch's answer is admitted at every
  element (check.element_interval) and sets the norm-wise budget, so torch's divide answer measured against a
  reciprocal oracle would carry a whole fp8 step at every tie into both, and loosen the check there;
- the other conventions are computed only when the stated one fails, so a kernel of the stated convention costs
  the judge nothing extra, and they are not kept.
A change to the recipe (no quantization, one scale per tensor instead of per row or block, another block size, a
wrong amax, a scale or element in another dtype) moves most values by whole quantization steps under every
convention, so it fails them all (tests/test_quant_conventions.py). Problems without CONVENTIONS take the default
path: one oracle, check.value_reasons as it is.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import torch

from . import check
from .check import Expected
from ...problem import DtypeSpec, ProblemError
from ...reasons import Reason

# The reference.py functions that must take `convention=` once a problem declares CONVENTIONS (those it defines).
CONVENTION_FUNCTIONS = ("reference", "oracle", "error_scale")


@dataclass
class Admissible(Expected):
    """The expectation under the problem's stated convention, plus the other admitted conventions' expectations,
    each as a function that computes it on demand."""
    convention: str = ""
    others: tuple = ()      # ((name, () -> Expected), ...)


@functools.lru_cache(maxsize=None)
def declared(module) -> tuple:
    """The module's CONVENTIONS, checked against the contract; () when it declares none. A malformed declaration
    is the problem author's error, named with the file."""
    names = getattr(module, "CONVENTIONS", None)
    if names is None:
        return ()
    where = getattr(module, "__file__", None) or module.__name__
    if (not isinstance(names, (tuple, list)) or not names or len(set(names)) != len(names)
            or not all(isinstance(n, str) and n for n in names)):
        raise ProblemError(f"{where}: CONVENTIONS must be a non-empty tuple of distinct names (the stated one "
                           f"first), got {names!r}")
    for name in CONVENTION_FUNCTIONS:
        fn = getattr(module, name, None)
        if fn is not None and "convention" not in inspect.signature(fn).parameters:
            raise ProblemError(f"{where}: {name}() must take a `convention` keyword, since the problem declares "
                               f"CONVENTIONS {tuple(names)}")
    return tuple(names)


def value_reasons(out: torch.Tensor, expected: Expected, spec: DtypeSpec) -> list[Reason]:
    """check.value_reasons against the stated convention, then against each other admitted one: [] as soon as one
    admits the whole output. Otherwise the stated convention's reasons, saying that the others were tried too."""
    reasons = check.value_reasons(out, expected, spec)
    others = getattr(expected, "others", ())
    if not reasons or not others:
        return reasons
    for _, make in others:
        if not check.value_reasons(out, make(), spec):
            return []
    tried = ", ".join(repr(name) for name, _ in others)
    note = (f" [against the stated quantization convention {expected.convention!r}; outside the budget under "
            f"{tried} as well]")
    return [Reason(r.code, r.detail + note, r.repro) for r in reasons]


def matches(out: torch.Tensor, expected: Expected, spec: DtypeSpec) -> bool:
    """check.matches under any admitted convention (used to tell a stale answer from a wrong one)."""
    return tuple(out.shape) == expected.shape and not value_reasons(out, expected, spec)
