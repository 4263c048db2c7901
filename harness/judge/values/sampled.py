"""Cheap checks of one timed call's output, taken from the judge's copy: sampled rows and a random projection.

What the judge draws, right after the batch's reply and never before (the output is fixed by then), from the call's
output `C` (shape (..., M, N)):
- `rows`: a few whole rows (dim -2, the same rows in every leading index), at least ROW_ELEMENTS elements in all
  (MIN_ROWS to MAX_ROWS rows). Judged later, like any correctness output, against the fp64 oracle computed on just
  those rows' inputs (the problem's `rows(index, *inputs)` in reference.py: the inputs whose reference is the full
  reference's rows `index`), so an element-wise check of a few rows costs a few rows of the oracle.
- `projection` (problems whose oracle is a product, `factors(*inputs)` -> (X, Y) in float64 with oracle = X @ Y,
  batched): Freivalds' check. A random sign vector r per leading index; the judge keeps r^T C (in float64) and the
  columns' norms ||C_:j||, and later computes r^T (X Y) = (r^T X) Y from its own regenerated inputs: two
  matrix-vector products instead of a GEMM. An honest element's error e_ij is within its element-wise budget
  (gauntlet.judge.values.check): |e_ij| <= b_ij = alpha (s_ij + |o_ij|)(1 + u) + u |o_ij| + h, with alpha = k_elem
  u_spec + k_acc 2**-24, s the problem's error scale, o the oracle, u the output dtype's unit roundoff and h half
  its smallest subnormal spacing. r is drawn after e is fixed, so by Hoeffding |sum_i r_i e_ij| exceeds
  t sqrt(sum_i b_ij^2) with probability at most 2 exp(-t^2 / 2): T_SIGMAS = 10 makes a false alarm a 4e-22 chance
  per column. The root sum of squares needs no full oracle: for a product s = sqrt((X*X)(Y*Y)), so sum_i s_ij^2 =
  ((1^T X*X)(Y*Y))_j exactly, and ||o_:j|| <= ||C_:j|| + ||e_:j||; solved for the honest case this gives
      B_j = (alpha (1 + u) ||s_:j|| + (alpha (1 + u) + u) ||C_:j|| + sqrt(M) h) / (1 - alpha - u),
  and a column fails when |r^T C_:j - r^T o_:j| > T_SIGMAS B_j (plus the projections' own float64 rounding). A
  larger C buys no room: its own error grows with it. A kernel that skips a quarter of K is off by about sqrt(K/4)
  products in every element, which puts its columns tens of B_j off (tests/test_output_checks.py holds honest
  outputs to 4 B_j). What a projection cannot see is a few wrong elements (their error is diluted by the column's);
  the sampled rows and the full spot checks (gauntlet.judge.timing.spots) are there for those.
Torch's own answer, which the element-wise check also admits, is not in B_j: on a product it is within b_ij.
"""
from __future__ import annotations

import math

import torch

from . import check, conventions
from .oracle import expected_for
from ...inputs import CaseInputs
from ...reasons import Reason

ROW_ELEMENTS, MIN_ROWS, MAX_ROWS = 8192, 2, 16
T_SIGMAS = 10.0
CHUNK = 1 << 24             # output elements turned to float64 at once (the projection's workspace)
NONFINITE_KEEP = 64         # non-finite elements of a call judged one by one (the projection leaves them out)


def draw_rows(shape, rng) -> list[int]:
    """Sorted distinct indices along dim -2 (dim 0 of a 1-d output; [] for a 0-d or empty one)."""
    if len(shape) == 0 or 0 in shape:
        return []
    m = shape[-2] if len(shape) >= 2 else shape[0]
    per_row = math.prod(shape) // m
    want = min(m, MAX_ROWS, max(MIN_ROWS, -(-ROW_ELEMENTS // max(per_row, 1))))
    return sorted(rng.sample(range(m), want))


def take_rows(out: torch.Tensor, rows: list[int]) -> torch.Tensor:
    dim = -2 if out.dim() >= 2 else 0
    return out.index_select(dim, torch.tensor(rows, device=out.device)).clone()


def project(out: torch.Tensor, seed: int) -> dict:
    """r (signs, int8, shape (..., M)), r^T C and ||C_:j|| (float64, (..., N)), over finite elements only, and up
    to NONFINITE_KEEP positions of non-finite ones with their values."""
    g = torch.Generator(device=out.device).manual_seed(seed)
    lead, m, n = out.shape[:-2], out.shape[-2], out.shape[-1]
    r = (torch.randint(0, 2, (*lead, m), generator=g, device=out.device, dtype=torch.int8) * 2 - 1)
    proj = torch.zeros((*lead, n), dtype=torch.float64, device=out.device)
    sq = torch.zeros_like(proj)
    finite = not out.is_floating_point() or bool(torch.isfinite(out).all())
    step = max(1, CHUNK // max(1, math.prod(lead) * n))
    for i in range(0, m, step):         # in float64: its own rounding stays far under the bound (2**-40 of it)
        part = out[..., i:i + step, :].to(torch.float64)
        if not finite:
            part = torch.nan_to_num(part, nan=0.0, posinf=0.0, neginf=0.0)
        proj += (r[..., i:i + step].unsqueeze(-2).to(torch.float64) @ part).squeeze(-2)
        sq += torch.linalg.vector_norm(part, dim=-2).square()
        del part
    bad = out.new_zeros((0, out.dim()), dtype=torch.long) if finite else (~torch.isfinite(out)).nonzero()
    if len(bad) > NONFINITE_KEEP:
        bad = bad[torch.randperm(len(bad), generator=g, device=out.device)[:NONFINITE_KEEP]]
    values = out[tuple(bad.t())].to(torch.float64) if len(bad) else torch.zeros(0, dtype=torch.float64)
    return {"r": r, "proj": proj, "colnorm": sq.sqrt(), "nonfinite": (bad, values)}


def rows_reasons(problem, spec, inputs, rows: list[int], values: torch.Tensor) -> list[Reason]:
    """The sampled rows against the oracle of just those rows (the problem's `rows` hook)."""
    module = problem.module()
    index = torch.tensor(rows, device=values.device)
    sub = CaseInputs(tuple(module.rows(index, *inputs)), getattr(inputs, "mode", "as_made"))
    expected = expected_for(problem, sub, spec)
    found = conventions.value_reasons(values.to(expected.oracle.device), expected, spec)
    for r in found:
        r.detail = f"[rows {rows[:8]}{' ...' if len(rows) > 8 else ''} of the output] {r.detail}"
    return found


def projection_reasons(problem, spec, inputs, taken: dict) -> list[Reason]:
    """Freivalds' check of one call (see the module docstring)."""
    x, y = problem.module().factors(*inputs)
    x, y = x.to(torch.float64), y.to(torch.float64)
    r = taken["r"].to(device=x.device, dtype=torch.float64).unsqueeze(-2)
    want = ((r @ x) @ y).squeeze(-2)
    rss = ((torch.ones_like(r) @ x.square()) @ y.square()).squeeze(-2).clamp_min(0).sqrt()
    found = _nonfinite_reasons(x, y, taken["nonfinite"], spec, taken["dtype"])
    got, colnorm = taken["proj"].to(x.device), taken["colnorm"].to(x.device)
    m, dtype = taken["r"].shape[-1], taken["dtype"]
    floating = dtype.is_floating_point and not spec.exact
    u = float(torch.finfo(dtype).eps) / 2 if floating else 0.0        # the output's own rounding
    alpha = spec.k_elem * spec.unit_roundoff + spec.k_acc * check.FP32_UNIT_ROUNDOFF if not spec.exact else 0.0
    sub = 0.5 * _subnormal_spacing(dtype) if floating else 0.0
    bound = (alpha * (1 + u) * rss + (alpha * (1 + u) + u) * colnorm + math.sqrt(m) * sub) / (1 - alpha - u)
    fp64 = 2.0**-40 * (want.abs() + math.sqrt(m) * (colnorm + rss))      # the projections' own float64 rounding
    allowed = T_SIGMAS * bound + fp64
    cols = _finite_columns(taken, want.shape)
    off = cols & ~((got - want).abs() <= allowed)
    if bool(off.any()):
        ratio = ((got - want).abs() / allowed.clamp_min(1e-300)).masked_fill(~off, 0)
        worst = tuple(int(i) for i in torch.unravel_index(ratio.argmax().cpu(), ratio.shape))
        found.append(Reason("mismatch", (
            f"random projection (Freivalds): r^T C misses r^T (A B) in {int(off.sum())} of {off.numel()} "
            f"column(s); worst at column {worst}: got {float(got[worst]):.8g}, expected {float(want[worst]):.8g}, "
            f"allowed +-{float(allowed[worst]):.3g} ({T_SIGMAS:g} x the honest bound)")))
    return found


def _finite_columns(taken: dict, shape) -> torch.Tensor:
    """Columns with no non-finite element (those elements are judged one by one instead)."""
    cols = torch.ones(shape, dtype=torch.bool, device=taken["proj"].device)
    bad, _ = taken["nonfinite"]
    if len(bad):
        cols[tuple(bad[:, :-2].t()) + (bad[:, -1],)] = False
    return cols


def _nonfinite_reasons(x, y, nonfinite, spec, dtype) -> list[Reason]:
    """Each kept non-finite element against its own oracle element (one dot product), rounded to the output."""
    bad, values = nonfinite
    for pos, got in zip(bad.tolist(), values.tolist()):
        lead, i, j = tuple(pos[:-2]), pos[-2], pos[-1]
        xi = x[lead + (i,)] if x.dim() > 2 else x[i]
        yj = y[lead + (slice(None), j)] if y.dim() > 2 else y[:, j]
        want = float(check.round_to((xi * yj).sum().reshape(1), dtype)[0])
        same = (math.isnan(got) and math.isnan(want)) or got == want
        if not same:
            return [Reason("nan_mismatch", f"element {tuple(pos)} is {got}, the oracle rounds to {want:.6g}")]
    return []


def _subnormal_spacing(dtype) -> float:
    info = torch.finfo(dtype)
    return float(info.smallest_normal) * float(info.eps)
