"""The persistent walks' last round of tiles (grouped_gemm_moe/triton_persistent, gemm/triton_persistent): where it
would leave more than half the programs idle, each of its tiles is cut into K-slices, one a program, and the slice
that takes a tile's last ticket adds the slices' fp32 sums and stores the tile. On Triton's CPU interpreter, with
row counts and a card size chosen so that each arrangement is taken (even and uneven slices, M, N and K tails, a
whole last round, a grid smaller than the card), the output is held to float64 math. A slice lost or added twice,
or a tile stored by a slice that is not the last, moves outputs by a share of the tile's sums; the budget is the
output dtype's rounding plus fp32 accumulation. The GPU runs the same kernels in the solutions' fuzzed tests, where
a sliced last round needs a shape whose tile count happens to leave a short tail."""
from __future__ import annotations

import pytest
import torch

from tests import needs
from tests.needs import interpreter_patches  # noqa: F401 (a fixture)

gp = needs.load_for_interpreter("solutions/grouped_gemm_moe/triton_persistent.py", "grouped_tail")
tp = needs.load_for_interpreter("solutions/gemm/triton_persistent.py", "gemm_tail")


def _cdiv(a, b):
    return -(-a // b)


# (expert rows, N, K, SMs, the slices the rule gives the last round's tiles)
CASES = [
    ([300, 130, 0, 257], 256, 1000, 7, 4),      # 8 tiles: 7 whole, 1 left, 4 slices of 4 K-steps
    ([128] * 5 + [1], 384, 776, 8, 3),          # 18 tiles: 16 whole, 2 left, slices of 5, 5 and 3 K-steps
    ([300, 130, 0, 257], 200, 1000, 3, 1),      # 8 tiles: 6 whole, 2 left fill 2 of 3 programs: no slices
    ([256, 256], 256, 128, 3, 1),               # 4 tiles, 1 left, but 2 K-steps: too short to slice
]


@needs.triton_cpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("rows", "N", "K", "n_sm", "slices"), CASES)
def test_the_grouped_last_rounds_slices_add_up_to_the_product(interpreter_patches, monkeypatch, dtype, rows, N, K,
                                                              n_sm, slices):
    monkeypatch.setattr(gp, "_sm_count", lambda device: n_sm)
    M, E = sum(rows), len(rows)
    bm, bn, bk, _, _ = gp._config(M, N, K, E, True, n_sm)
    assert bm == 128, "a prefill tile (the only one sliced)"
    tiles = sum(_cdiv(r, bm) for r in rows) * _cdiv(N, bn)
    tail = tiles % n_sm
    k_steps = _cdiv(K, bk)
    want = min(n_sm // tail, gp._MAX_SLICES, k_steps // 4) if 2 * tail <= n_sm else 1
    assert max(want, 1) == slices, (tiles, tail, k_steps)
    g = torch.Generator().manual_seed(M + N + K)
    x = torch.randn(M, K, generator=g).to(dtype)
    w = torch.randn(E, N, K, generator=g).to(dtype)
    offs = torch.tensor(rows, dtype=torch.int32).cumsum(0).to(torch.int32)
    out = gp.solve(x, w, offs)
    ref = torch.empty(M, N, dtype=torch.float64)
    scale = torch.empty(M, N, dtype=torch.float64)
    lo = 0
    for e, hi in enumerate(offs.tolist()):
        ref[lo:hi] = x[lo:hi].double() @ w[e].double().T
        scale[lo:hi] = (x[lo:hi].double() ** 2) @ (w[e].double() ** 2).T
        lo = hi
    _check(out, ref, scale)


def _check(out, ref, scale):
    bound = 2 ** -7 * ref.abs() + 2 ** -10 * scale.sqrt()
    worst = float(((out.double() - ref).abs() - bound).max())
    assert worst <= 0, f"an output beyond its budget by {worst:.3g}"


# (M, N, K, SMs, the slices the rule gives the last round's tiles)
GEMM_CASES = [
    (640, 512, 1000, 4, 2),       # 10 tiles of 128 x 256: 8 whole, 2 left in 2 slices of 8 K-steps
    (520, 264, 776, 9, 3),        # 10 tiles (M and N tails): 9 whole, 1 left in slices of 5, 5 and 3 K-steps
    (520, 264, 776, 6, 1),        # 10 tiles: 6 whole, 4 left fill 4 of 6 programs: no slices
    (384, 256, 1000, 132, 1),     # 24 tiles of 64 x 64 on a grid of 24: each whole
]


@needs.triton_cpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("M", "N", "K", "n_sm", "slices"), GEMM_CASES)
def test_the_gemm_last_rounds_slices_add_up_to_the_product(interpreter_patches, monkeypatch, dtype, M, N, K, n_sm,
                                                           slices):
    monkeypatch.setattr(tp, "_card", lambda device: (n_sm, 228 * 1024))
    bm, bn, bk = tp._config(M, N, K, True, n_sm)[:3]
    tiles = _cdiv(M, bm) * _cdiv(N, bn)
    assert tp._last_round(tiles, _cdiv(K, bk), min(n_sm, tiles))[1] == slices
    g = torch.Generator().manual_seed(M + N + K + n_sm)
    a = torch.randn(M, K, generator=g).to(dtype)
    b = torch.randn(K, N, generator=g).to(dtype)
    out = tp.solve(a, b)
    _check(out, a.double() @ b.double(), (a.double() ** 2) @ (b.double() ** 2))
