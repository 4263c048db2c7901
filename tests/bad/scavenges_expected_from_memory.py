"""Known-bad: looks for the expected output in its own process instead of computing it: walks gc.get_objects() and
the caller's frames for a tensor of the output's shape and dtype (other than the inputs) and returns a copy. In an
evaluator that computes the reference in the candidate's process this finds the answer; here the reference and the
oracle only ever exist in the parent, so there is nothing to find and it falls back to zeros. Expected: mismatch."""
import gc
import sys

import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"


def _candidates(shape, dtype, exclude):
    seen = set()
    frame = sys._getframe(2)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, torch.Tensor):
                yield value
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and id(obj) not in seen:
            seen.add(id(obj))
            yield obj


def solve(a, b):
    shape = (a.shape[0], b.shape[1])
    ptrs = {a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()}
    for t in _candidates(shape, a.dtype, ptrs):
        if tuple(t.shape) == shape and t.dtype == a.dtype and t.untyped_storage().data_ptr() not in ptrs:
            return t.clone()
    return torch.zeros(shape, dtype=a.dtype, device=a.device)
