"""attention_fwd/triton_flash's split-KV merge: partials of many splits are merged a tile of splits at a time, and the
result is the attention over every key, on Triton's CPU interpreter, including several tiles of splits with an
uneven last one. The GPU judges the same kernel in the solution tests (fuzzed over its domain, where decode shapes
split the keys up to 70 ways); a CPU fuzz case splits at most 5 ways, so one tile of splits would be all it
ever merged."""
from __future__ import annotations

import pytest
import torch

from gauntlet import discover
from tests import needs

flash = needs.load_for_interpreter("solutions/attention_fwd/triton_flash.py", "merge_triton_flash")
problem = discover.get_problem("attention_fwd").module()     # its reference, run in float64, is the oracle


def test_the_merge_tile_stays_within_its_register_budget_on_a_gpu_and_takes_many_rows_on_the_interpreter():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert flash._merge_config(4, 128, 16, cuda) == (2, 16)       # decode, one 8k sequence: 16 programs, not 8
    assert flash._merge_config(4, 128, 70, cuda) == (2, 16)       # the rest in further tiles of 16
    assert flash._merge_config(4, 64, 3, cuda) == (4, 4)
    assert flash._merge_config(1024, 64, 2, cuda) == (32, 2)
    assert flash._merge_config(300, 128, 11, cpu) == (64, 8)


@needs.triton_cpu
@pytest.mark.parametrize(("B", "Hkv", "G", "Sq", "Sk", "D", "causal"),
                         [(1, 1, 4, 1, 4200, 128, True),      # 33 splits: 8 x 4 + 1, or 16 + 16 + 1
                          (1, 2, 1, 2, 4300, 64, False),      # D = 64: 17 splits of 256 keys: 8 + 8 + 1, or 16 + 1
                          (2, 1, 2, 3, 4100, 128, True)])     # 22 splits: 8 + 8 + 6, or 16 + 6
@pytest.mark.parametrize("tiles_of", ["cpu", "cuda"])
def test_many_splits_merge_to_the_attention_over_every_key(monkeypatch, B, Hkv, G, Sq, Sk, D, causal, tiles_of):
    """A tile of splits dropped, counted twice or weighted with another tile's maximum misses by a share of |O|.
    `tiles_of`: the merge tiles the interpreter takes (64 rows, 8 splits) or those a GPU takes (1 to 4 rows, 16
    splits), run here on the interpreter."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    seen, config = [], flash._merge_config

    def recording(M, D_, splits, device):
        seen.append(splits)
        return config(M, D_, splits, torch.device(tiles_of))
    monkeypatch.setattr(flash, "_merge_config", recording)
    g = torch.Generator().manual_seed(B * 1000 + Sk + D)
    q = torch.randn(B, Hkv * G, Sq, D, generator=g).half()
    k = torch.randn(B, Hkv, Sk, D, generator=g).half()
    v = torch.randn(B, Hkv, Sk, D, generator=g).half()
    out = flash.solve(q, k, v, causal)
    assert seen and seen[0] > config(Sq * G, D, seen[0], torch.device(tiles_of))[1], seen   # more than one tile
    ref = problem.reference(q.double(), k.double(), v.double(), causal)
    torch.testing.assert_close(out.double(), ref, rtol=2 ** -9, atol=2 ** -9 * float(ref.abs().max()))
