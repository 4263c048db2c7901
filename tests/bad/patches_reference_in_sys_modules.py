"""Known-bad: finds the problem's reference module in the child and replaces its reference() and make_inputs() so
that, in that process, the inputs are zeros and the reference returns zeros; then returns zeros. An evaluator that
computed the inputs or the reference in the candidate's process would agree. The module is not in sys.modules
(gauntlet.problem.load_module executes it without registering it, so sys.modules['gauntlet_problem_gemm'] is
absent), so the candidate looks there first and then walks gc.get_objects() for a module of that name.
What the harness sees today: the child's make_inputs now makes zeros, the parent regenerates the real inputs and
their digests differ -> input_mutated; the tamper watch, which collects "gauntlet_problem_*" functions from
sys.modules, watches nothing of the problem module, so the patch itself is not reported. It should watch the
problem module object it holds (self.problem.module()) directly. Expected: tampering."""
import gc
import sys
import types

import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"


def _problem_module():
    found = sys.modules.get("gauntlet_problem_gemm")
    if found is not None:
        return found
    for obj in gc.get_objects():
        if isinstance(obj, types.ModuleType) and getattr(obj, "__name__", "") == "gauntlet_problem_gemm":
            return obj
    return None


_ref = _problem_module()
if _ref is not None:
    _real_make_inputs = _ref.make_inputs

    def make_inputs(shape, dtype, seed, device):
        return tuple(torch.zeros_like(x) for x in _real_make_inputs(shape, dtype, seed, device))

    _ref.make_inputs = make_inputs
    _ref.reference = lambda a, b: torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
