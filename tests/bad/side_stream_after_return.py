"""Known-bad (GPU): launches the real product on a side CUDA stream and returns the output buffer at once, without
making the caller's stream wait for it (it does wait for the inputs, so the values are right once the device is
idle). A timer that records CUDA events on the current stream measures an empty interval; GPU MODE submissions did
this. Correctness passes: the worker synchronizes the whole device before copying the output, and the timing
harness syncs the device after each call too (its wall clock sees the work), but the event times it scores with
show almost nothing. Expected: below_roofline (an event time faster than the card's FLOP rate allows).
The harness could also report background_work by checking, right after solve returns, that streams other than the
current one have no work pending (cudaStreamQuery on the streams the candidate created)."""
import torch

BACKEND = "torch"
EXPECTED = "below_roofline"
ALSO_ACCEPTED = ("background_work",)
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
        torch.matmul(a, b, out=c)
    return c
