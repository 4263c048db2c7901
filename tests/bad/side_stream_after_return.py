"""Known-bad (GPU): launches the real product on a side CUDA stream and returns the output buffer at once, without
making the caller's stream wait for it (it does wait for the inputs). A timer that records CUDA events on the
current stream measures an almost empty interval (GPU MODE submissions did this). Here the side stream also spins
~5 ms first (torch.cuda._sleep), standing in for a large product, so the outcome does not depend on a race.

What the harness does: the worker syncs the current stream only and copies the output on that stream at once
(still unwritten: a poisoned NaN block, or garbage), then syncs the whole device and times that: work still running
more than the straggler limit after solve returned (1 ms, more where several judges share the GPU) is background
work, reported before values are compared. Where the limit is above this file's ~5 ms (three judges on one GPU:
6 ms), the unwritten copy fails the values instead. In timing, the gap between host wall time and event time says
the same. Expected: background_work (or the unwritten output's nan_mismatch / mismatch)."""
import torch

BACKEND = "torch"
EXPECTED = "background_work"
ALSO_ACCEPTED = ("nan_mismatch", "mismatch")
DEVICE = "cuda"
DTYPES = ("bfloat16",)

_side = None


def solve(a, b):
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    _side.wait_stream(torch.cuda.current_stream())      # inputs are ready; the caller is NOT made to wait for c
    with torch.cuda.stream(_side):
        torch.cuda._sleep(10_000_000)                    # ~5 ms of cycles: a big kernel's worth of time
        torch.matmul(a, b, out=c)
    return c
