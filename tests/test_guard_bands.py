"""Guard bands around every input (gauntlet.child.guard.banded): reads past an input's end see poison instead of a
lucky zero, writes past it are caught. CPU tests of the child-side helpers, and one judgement end to end."""
from __future__ import annotations

import math
import torch

from gauntlet.child import guard


def test_banded_inputs_keep_values_shapes_strides_and_alignment():
    a = torch.randn(5, 7)
    t = torch.randn(7, 5).t()                    # a transposed view: strides kept
    offs = torch.tensor([3, 9, 12], dtype=torch.int32)
    out, bands = guard.banded((a, t, offs, 3.0))
    assert out[3] == 3.0 and bands[3] is None
    for x, y in zip((a, t, offs), out[:3]):
        assert torch.equal(x, y) and x.shape == y.shape and x.stride() == y.stride()
        assert y.data_ptr() % 16 == 0                 # vector loads, TMA and cuBLAS keep their alignment
    assert guard.bands_changed(bands) == []


def test_a_read_just_before_an_input_sees_poison():
    offs = torch.tensor([3, 9, 12], dtype=torch.int32)
    (banded,), _ = guard.banded((offs,))
    before = banded.as_strided((1,), (1,), banded.storage_offset() - 1)
    assert int(before) == -1                      # 0xFFFFFFFF: not the 0 a lucky read used to find
    (x,), _ = guard.banded((torch.ones(4, dtype=torch.bfloat16),))
    after = x.as_strided((1,), (1,), x.storage_offset() + 4)
    assert math.isnan(float(after))


def test_a_write_past_the_end_is_reported():
    (x, y), bands = guard.banded((torch.zeros(8), torch.zeros(3, dtype=torch.float16)))
    x.as_strided((1,), (1,), x.storage_offset() + 8).fill_(1.0)
    assert guard.bands_changed(bands) == [0]
# End to end: tests/bad/writes_past_input.py (EXPECTED out_of_bounds_write), judged by tests/test_corpus_extra.py.
