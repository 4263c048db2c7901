"""Known-bad: keeps one output buffer per shape at module level and returns it from every call, refilled with the
right answer each time. Each answer is right when it is read, so value checks pass; but a caller that keeps two
results finds the first overwritten by the second. The worker drops its own reference to the output after the call
and asks whether the memory is still alive: it is, held by the module. Expected: output_retained."""
import torch

BACKEND = "torch"
EXPECTED = "output_retained"
DEVICE = "cpu"

_buffers = {}


def solve(a, b):
    key = (a.shape[0], b.shape[1], a.dtype, a.device)
    if key not in _buffers:
        _buffers[key] = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    out = _buffers[key]
    torch.matmul(a, b, out=out)
    return out
