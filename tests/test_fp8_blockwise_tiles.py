"""fp8_gemm_blockwise/triton_blockwise at the tiles a GPU runs: its rule picks 64x128 where the tiles fill the card
and 64x64 where they do not, but on the CPU the fuzzed shapes (M, N <= 320) never fill 132 SMs, so the interpreter
would only ever run 64x64. Here the card is made small (or large) so both tilings run on Triton's CPU interpreter,
with M, N and K tails and N crossing the weight's 128-column scale blocks inside one tile, against the problem's
float64 oracle."""
from __future__ import annotations

import pytest
import torch

from gauntlet import discover
from gauntlet.backends import triton_interpreter
from tests import needs

fp8 = needs.load_for_interpreter("solutions/fp8_gemm_blockwise/triton_blockwise.py", "tiles_triton_blockwise")
ref = discover.get_problem("fp8_gemm_blockwise").module()


@pytest.fixture
def patched(monkeypatch):
    """The harness's interpreter patches (exact fp8 dots and casts), as a Triton solution's worker installs them."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_interpreter.patch_interpreter(), triton_interpreter.unsupported_internals()
    yield
    triton_interpreter.unpatch_interpreter()


def test_the_tiles_are_64_rows_and_halve_their_columns_only_where_they_leave_sms_idle():
    assert fp8._gemm_config(4096, 24576, 132) == (64, 128, 4, 4)
    assert fp8._gemm_config(4096, 2112, 132) == (64, 128, 4, 4)       # 64 x 17 tiles: more than the SMs
    assert fp8._gemm_config(64, 7168, 132) == (64, 64, 4, 4)          # 56 tiles of 128 columns: halved
    assert fp8._gemm_config(64, 7168, 40) == (64, 128, 4, 4)          # the same shape on a smaller card


@needs.triton_cpu
@pytest.mark.parametrize("n_sm", [1, 10_000], ids=["64x128", "64x64"])
@pytest.mark.parametrize(("M", "N", "K"), [(70, 200, 300), (130, 129, 640), (1, 257, 129)])
def test_each_tiling_matches_the_oracle_with_every_tail(patched, monkeypatch, n_sm, M, N, K):
    """A scale block read for the wrong columns, a K block dropped or a tail row or column mixed up moves outputs by
    whole multiples of their size; the budget is the problem's (2**-8 of the error scale) plus bf16's rounding."""
    monkeypatch.setattr(fp8, "_sm_count", lambda device: n_sm)
    assert fp8._gemm_config(M, N, n_sm)[1] == (128 if n_sm == 1 else 64)
    x, w, ws = ref.make_inputs({"M": M, "N": N, "K": K}, torch.bfloat16, M * 31 + N * 7 + K, "cpu")
    out = fp8.solve(x, w, ws).double()
    want = ref.oracle(x, w, ws)
    scale = ref.error_scale(x, w, ws)
    bound = 2 ** -8 * (scale + want.abs()) + 2 ** -8 * want.abs()
    worst = float(((out - want).abs() - bound).max())
    assert worst <= 0, f"{n_sm} SMs, {M}x{N}x{K}: an output beyond its budget by {worst:.3g}"
