"""gemm/triton_persistent's few-row kernel (M <= 256): its slices of K follow the card it runs on, and its sums are
right for every slicing, uneven slices and M, N and K tails included, on Triton's CPU interpreter. The GPU judges
the same kernel in the ordinary solution tests (fuzzed over its whole domain); this file pins the rule and the
arithmetic of the slices, which a fuzzed case reaches only when its shape happens to leave SMs idle."""
from __future__ import annotations

import pytest
import torch

from tests import needs

H100 = (132, 228 * 1024)          # SMs and shared memory per SM of an H100 SXM or an H200

pers = needs.load_for_interpreter("solutions/gemm/triton_persistent.py", "few_rows_triton_persistent")


def _cdiv(a, b):
    return -(-a // b)


def test_the_decode_shapes_are_sliced_only_where_the_tiles_leave_the_card_idle():
    """Llama-3-8B's two decode GEMMs on an H100/H200: 112 tiles of 128 x 128 give all but 20 of 132 SMs one
    program (one an SM, 5 stages, no slices); 64 tiles of 64 x 128 do not fill it (4 slices: two programs per SM of
    228 KiB, one wave)."""
    assert pers._splitk_config(128, 14336, 4096, *H100) == (128, 128, 64, 4, 5, 1)
    assert pers._splitk_config(128, 4096, 14336, *H100) == (64, 128, 64, 4, 4, 4)


def test_wide_tiles_only_where_they_fill_the_card_and_fit_it():
    """The 128 x 128 tiles take the card only where they leave at most half its SMs idle and never ask a second
    wave, and only where their 5 stages fit its shared memory; elsewhere the 64 x 128 tiles stay."""
    assert pers._splitk_config(128, 14336, 4096, 132, 100 * 1024)[:2] == (64, 128)     # 160 KiB do not fit
    assert pers._splitk_config(128, 14336, 4096, 264, 228 * 1024)[:2] == (64, 128)     # 112 of 264 SMs
    assert pers._splitk_config(128, 14336, 4096, 100, 228 * 1024)[:2] == (64, 128)     # 112 tiles: a second wave
    assert pers._splitk_config(256, 8192, 4096, *H100)[:2] == (128, 128)               # 128 tiles
    assert pers._splitk_config(64, 14336, 4096, *H100)[:2] == (64, 128)                # fewer than 128 rows


def test_the_slices_follow_the_card():
    """The same shape on other cards: fewer programs per SM where shared memory is smaller, more slices where there
    are more SMs, none where the tiles already give half the SMs a program."""
    assert pers._splitk_config(128, 4096, 14336, 132, 100 * 1024)[-1] == 2      # one program per SM
    assert pers._splitk_config(128, 4096, 14336, 264, 228 * 1024)[-1] == 8
    assert pers._splitk_config(128, 4096, 14336, 100, 228 * 1024)[-1] == 1     # 64 tiles: more than half of 100


@pytest.mark.parametrize("card", [H100, (108, 164 * 1024), (264, 228 * 1024), (16, 64 * 1024)])
def test_every_slicing_the_rule_picks_fits_one_wave_and_keeps_its_pipeline_full(card):
    n_sm, smem = card
    for M in (1, 16, 37, 64, 128, 200, 256):
        for N in (8, 136, 1024, 4096, 14336):
            for K in (16, 1000, 4096, 14336):
                bm, bn, bk, _, stages, S = pers._splitk_config(M, N, K, n_sm, smem)
                tiles = _cdiv(M, bm) * _cdiv(N, bn)
                per_sm = max(1, smem // ((bm + bn) * bk * 2 * stages + 1024))
                assert 1 <= S <= 16
                if S > 1:
                    assert 2 * tiles <= n_sm, (M, N, K, S)
                    assert tiles * S <= n_sm * per_sm, (M, N, K, S)
                    assert _cdiv(K, bk) >= 4 * S, (M, N, K, S)


@needs.triton_cpu
@pytest.mark.parametrize(("M", "N", "K"), [(128, 256, 1024), (37, 136, 1000), (200, 24, 520), (1, 8, 8)])
@pytest.mark.parametrize("S", [1, 2, 3, 5])
def test_every_slicing_sums_to_the_product(monkeypatch, M, N, K, S):
    """Each slicing (uneven last slices where S does not divide the K-steps; fewer when K is short) gives the
    product rounded once: a slice lost, counted twice or cut at the wrong K-step would miss by a share of |C|."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    g = torch.Generator().manual_seed(M * 7 + N * 3 + K + S)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    bm, bn, bk, warps, stages, _ = pers._splitk_config(M, N, K, *H100)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    out = pers._splitk(a, b, c, H100, (bm, bn, bk, warps, stages, S))
    assert out is c
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, rtol=2 ** -10, atol=2 ** -10 * float(ref.abs().max()))
