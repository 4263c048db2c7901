"""Correctness against an fp64 oracle, with a budget set by torch's own error at the same precision.

The rule (quack's, adopted by Liger): a candidate may be at most k times as wrong as torch's own op in the same
precision on the same inputs. Both are measured against the float64 oracle, two ways:
- norm-wise: ||out - oracle|| <= k_norm * ||torch - oracle|| + floor * u * ||scale||
- element-wise: |out - oracle|_i <= (k_elem * t + floor * u) * scale_i, where scale_i is |oracle_i| (output
  rounding) plus the problem's error scale (accumulation: root-sum-square of the products for GEMM), and t is
  torch's worst error relative to that scale. A single wrong element in a large output therefore fails, even
  where the norm barely moves.
NaN/Inf positions must match the oracle rounded to the output dtype (overflow to inf is a legitimate answer).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.problem import DtypeSpec
from harness.reasons import Reason


@dataclass
class Expected:
    """What the trusted side computed for one call: the oracle and torch's own answer."""
    oracle: torch.Tensor          # float64 (or the exact integer result)
    torch_out: torch.Tensor       # torch's op in the candidate's precision
    scale: torch.Tensor           # per-element error scale, float64, same shape as oracle

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


def value_reasons(out: torch.Tensor, expected: Expected, spec: DtypeSpec) -> list[Reason]:
    """Compare values; returns [] when the output is within budget."""
    if spec.exact:
        return _exact_reasons(out, expected)
    oracle = expected.oracle
    out64 = out.to(device=oracle.device, dtype=torch.float64)
    rounded = oracle.to(expected.dtype).to(torch.float64)   # where the output dtype overflows, inf is right
    bad_nonfinite = _nonfinite_mismatch(out64, rounded)
    if bad_nonfinite:
        return [Reason("nan_mismatch", bad_nonfinite)]
    finite = torch.isfinite(rounded)
    err_c = torch.where(finite, out64 - oracle, 0).abs()
    err_t = torch.where(finite, expected.torch_out.to(torch.float64) - oracle, 0).abs()
    # Output rounding is relative to the value itself; accumulation error to the problem's scale. Budget both.
    scale = torch.where(finite, expected.scale + oracle.abs(), 0)
    u = spec.unit_roundoff
    reasons = []
    norm_c, norm_t, norm_s = (float(torch.linalg.vector_norm(x)) for x in (err_c, err_t, scale))
    norm_budget = spec.k_norm * norm_t + spec.floor * u * norm_s
    if not norm_c <= norm_budget:
        reasons.append(Reason("mismatch", f"norm-wise error {norm_c:.3e} > budget {norm_budget:.3e} "
                                          f"(torch's own error {norm_t:.3e}, k_norm={spec.k_norm:g})"))
    positive = scale > 0
    t = float((err_t[positive] / scale[positive]).max()) if bool(positive.any()) else 0.0
    # Near zero the output format's spacing is absolute (subnormals): allow k_elem of its smallest step there.
    tiny = torch.finfo(expected.dtype).smallest_normal * torch.finfo(expected.dtype).eps \
        if expected.dtype.is_floating_point else 0.0
    bound = (spec.k_elem * t + spec.floor * u) * scale + spec.k_elem * tiny
    over = err_c > bound
    n_over = int(over.sum())
    if n_over:
        reasons.append(Reason("mismatch", _element_report(over, n_over, out64, oracle, bound)))
    return reasons


def _nonfinite_mismatch(out64: torch.Tensor, rounded: torch.Tensor) -> str:
    for name, pred in (("NaN", torch.isnan), ("+inf", lambda x: x == float("inf")),
                       ("-inf", lambda x: x == float("-inf"))):
        got, want = pred(out64), pred(rounded)
        diff = got != want
        if bool(diff.any()):
            idx = tuple(int(i) for i in diff.nonzero()[0])
            return (f"{int(diff.sum())} element(s) disagree on {name}; first at {idx}: "
                    f"got {float(out64[idx]):.6g}, expected {float(rounded[idx]):.6g}")
    return ""


def _element_report(over, n_over, out64, oracle, bound) -> str:
    worst = int(((out64 - oracle).abs() - bound).masked_fill(~over, float("-inf")).argmax())
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), over.shape))
    first = tuple(int(i) for i in over.nonzero()[0])
    rows = sorted({int(i) for i in over.nonzero()[:, 0][:8]}) if over.dim() else []
    return (f"{n_over} of {over.numel()} element(s) outside the element-wise budget; worst at {idx}: "
            f"got {float(out64[idx]):.6g}, expected {float(oracle[idx]):.6g}, allowed error {float(bound[idx]):.3g}; "
            f"first at {first}" + (f"; leading-dim indices include {rows}" if rows else ""))


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
