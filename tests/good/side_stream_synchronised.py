"""Known-good, unusual (GPU): runs the product on its own side stream, correctly: the side stream waits for the
caller's stream (inputs ready), the caller's stream waits for the side stream (output ready) before solve returns,
and the output's memory is recorded on the caller's stream. Nothing is pending on any stream the caller does not
wait on. Compare bad/side_stream_after_return.py. Expected: pass."""
import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cuda"
DTYPES = ("bfloat16",)

_side = None


def solve(a, b):
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    caller = torch.cuda.current_stream()
    _side.wait_stream(caller)
    with torch.cuda.stream(_side):
        c = torch.matmul(a, b)
    caller.wait_stream(_side)
    c.record_stream(caller)
    return c
