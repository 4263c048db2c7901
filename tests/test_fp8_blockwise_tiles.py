"""fp8_gemm_blockwise/triton_blockwise at the tiles a GPU runs: its rule picks 64x128 where the tiles fill the card,
K split into slices where they do not, and 64x64 where K is too short to split; on the CPU the fuzzed shapes (M, N
<= 320, K <= 800) never fill 132 SMs nor reach two slices, so the interpreter would only ever run 64x64. Here each
configuration is forced so that all of them run on Triton's CPU interpreter, with M, N and K tails, N crossing the
weight's 128-column scale blocks inside one tile and slices of unequal length, against the problem's float64
oracle."""
from __future__ import annotations

import pytest
import torch

from gauntlet import discover
from tests import needs
from tests.needs import interpreter_patches  # noqa: F401 (a fixture)

fp8 = needs.load_for_interpreter("solutions/fp8_gemm_blockwise/triton_blockwise.py", "tiles_triton_blockwise")
ref = discover.get_problem("fp8_gemm_blockwise").module()


def test_the_tiles_are_64_rows_and_split_k_only_where_they_leave_sms_idle():
    assert fp8._gemm_config(4096, 24576, 12, 132) == (64, 128, 4, 4, 1)
    assert fp8._gemm_config(4096, 2112, 56, 132) == (64, 128, 4, 4, 1)     # 64 x 17 tiles: more than the SMs
    assert fp8._gemm_config(64, 7168, 128, 132) == (64, 128, 4, 4, 3)      # 56 tiles: 3 slices fill 132 SMs
    assert fp8._gemm_config(64, 7168, 128, 40) == (64, 128, 4, 4, 1)       # the same shape on a smaller card
    assert fp8._gemm_config(64, 7168, 24, 132) == (64, 128, 4, 4, 3)       # 24 K blocks: 3 slices of 8
    assert fp8._gemm_config(64, 7168, 20, 132) == (64, 128, 4, 4, 2)       # capped at SPLIT_MIN_KB a slice
    assert fp8._gemm_config(64, 7168, 12, 132) == (64, 64, 4, 4, 1)        # too short to split: halve N


@needs.triton_cpu
@pytest.mark.parametrize("config", [(64, 128, 4, 4, 1), (64, 64, 4, 4, 1), (64, 64, 4, 4, 3), (64, 256, 4, 3, 1)],
                         ids=["64x128", "64x64", "64x64-split3", "64x256"])
@pytest.mark.parametrize(("M", "N", "K"), [(70, 200, 300), (130, 129, 640), (1, 257, 129)])
def test_each_tiling_matches_the_oracle_with_every_tail(interpreter_patches, monkeypatch, config, M, N, K):
    """A scale block read for the wrong columns, a K block dropped or summed twice across slices, or a tail row or
    column mixed up moves outputs by whole multiples of their size; the budget is the problem's (2**-8 of the error
    scale) plus bf16's rounding. Three slices of K = 640 (5 blocks) are 2 + 2 + 1 blocks; of K = 129, 1 + 1."""
    monkeypatch.setattr(fp8, "_gemm_config", lambda M, N, KB, n_sm: config)
    x, w, ws = ref.make_inputs({"M": M, "N": N, "K": K}, torch.bfloat16, M * 31 + N * 7 + K, "cpu")
    out = fp8.solve(x, w, ws).double()
    want = ref.oracle(x, w, ws)
    scale = ref.error_scale(x, w, ws)
    bound = 2 ** -8 * (scale + want.abs()) + 2 ** -8 * want.abs()
    worst = float(((out - want).abs() - bound).max())
    assert worst <= 0, f"{config}, {M}x{N}x{K}: an output beyond its budget by {worst:.3g}"


def test_the_persistent_path_is_for_grids_of_several_waves():
    assert fp8._tma_config(4096, 24576, 12, 132) is not None           # 64 x 192 tiles of 64x128
    assert fp8._tma_config(4096, 2112, 56, 132) is not None
    assert fp8._tma_config(128, 24576, 12, 132) is None                # decode: 384 tiles, under 4 waves
    assert fp8._tma_config(64, 7168, 128, 132) is None                 # split-K's shape


@needs.triton_cpu
@pytest.mark.parametrize("config", [(128, 128, 8, 4, 1, True), (64, 128, 4, 3, 2, False), (64, 64, 4, 3, 1, False)],
                         ids=["128x128-split-store", "64x128-two-an-sm", "64x64"])
@pytest.mark.parametrize(("M", "N", "K"), [(200, 264, 400), (130, 136, 640), (1, 264, 144)])
def test_the_persistent_path_matches_the_oracle_with_every_tail(interpreter_patches, monkeypatch, config, M, N, K):
    """The TMA path forced on a one-SM card, so one program walks every tile (the next tile's loads overlapping this
    one's epilogue): K tails zero-filled by TMA (400 = 3 blocks + 16), M and N tails clipped at the store, a tile
    that crosses a weight scale block (64x128 at n = 64). Same budget as above."""
    taken = []
    real = fp8._persistent
    monkeypatch.setattr(fp8, "_tma_config", lambda M, N, KB, n_sm: config)
    monkeypatch.setattr(fp8, "_sm_count", lambda device: 1)
    monkeypatch.setattr(fp8, "_persistent", lambda *a: taken.append(real(*a)) or taken[-1])
    x, w, ws = ref.make_inputs({"M": M, "N": N, "K": K}, torch.bfloat16, M * 31 + N * 7 + K, "cpu")
    out = fp8.solve(x, w, ws).double()
    assert taken == [True], "the TMA path was not taken"
    want = ref.oracle(x, w, ws)
    scale = ref.error_scale(x, w, ws)
    bound = 2 ** -8 * (scale + want.abs()) + 2 ** -8 * want.abs()
    worst = float(((out - want).abs() - bound).max())
    assert worst <= 0, f"{config}, {M}x{N}x{K}: an output beyond its budget by {worst:.3g}"
