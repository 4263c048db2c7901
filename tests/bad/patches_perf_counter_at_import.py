"""Known-bad: replaces time.perf_counter (and perf_counter_ns) at import with a clock that runs at a tenth of the
real rate, so any host-side timer in the judge's process would report a tenth of the true time (GPU MODE saw timer
patching). The child snapshots the identity of the timers before importing the candidate and compares after.
Expected: tampering."""
import time

import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"

_real, _real_ns = time.perf_counter, time.perf_counter_ns
_t0, _t0_ns = _real(), _real_ns()
time.perf_counter = lambda: _t0 + (_real() - _t0) / 10
time.perf_counter_ns = lambda: _t0_ns + (_real_ns() - _t0_ns) // 10


def solve(a, b):
    return torch.matmul(a, b)
