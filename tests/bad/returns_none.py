"""Known-bad: computes into a buffer it keeps and returns None (an in-place kernel API wrapped as if it were
functional; some evaluators only compare a pre-allocated output buffer they pass in). Expected: not_a_tensor."""
import torch

BACKEND = "torch"
EXPECTED = "not_a_tensor"
DEVICE = "cpu"
_out = {}


def solve(a, b):
    _out["c"] = torch.matmul(a, b)
    return None
