"""Known-bad: finds the problem's reference module in the child (sys.modules['gauntlet_problem_gemm']) and replaces
reference() and make_inputs() so that, in that process, the inputs are zeros and the reference returns zeros; then
returns zeros. An evaluator that computed the reference or the inputs in the candidate's process would agree. Here
the parent regenerates inputs and the oracle itself; and the child snapshots the problem module's functions before
importing the candidate. Expected: tampering."""
import sys

import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"

_ref = sys.modules.get("gauntlet_problem_gemm")
if _ref is not None:
    _real_make_inputs = _ref.make_inputs

    def make_inputs(shape, dtype, seed, device):
        return tuple(torch.zeros_like(x) for x in _real_make_inputs(shape, dtype, seed, device))

    _ref.make_inputs = make_inputs
    _ref.reference = lambda a, b: torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
