"""Known-bad (GPU): behaves during the correctness phase, then, once it sees the timing pattern (the same input
tensors coming back again and again, 8 times or more: the timer rotates a few input sets, refilled in place, so
their addresses repeat; fuzzed calls allocate fresh ones), patches
torch.cuda.Event.elapsed_time to report a microsecond. Every time in that process, the baseline's included,
becomes 0.001 ms. The child compares the timers' identity after the timing request too. Expected: tampering
(and a below_roofline check would flag the 0.001 ms as well)."""
import collections

import torch

BACKEND = "torch"
EXPECTED = "tampering"
ALSO_ACCEPTED = ("below_roofline",)
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_seen = collections.Counter()


def solve(a, b):
    _seen[(a.data_ptr(), b.data_ptr(), tuple(a.shape))] += 1
    if max(_seen.values()) >= 4 and not getattr(torch.cuda.Event.elapsed_time, "_fake", False):
        def elapsed_time(self, end_event):
            return 1e-3
        elapsed_time._fake = True
        torch.cuda.Event.elapsed_time = elapsed_time
    return torch.matmul(a, b)
