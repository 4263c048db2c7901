"""Known-bad: patches torch.cuda.Event.elapsed_time from inside solve (not at import, so an import-time check alone
would miss it) to report a hundredth of the measured time. The class exists on CPU-only builds too, so the patch
and its detection do not need a GPU; the child compares the identity of the timer functions after every call.
Expected: tampering."""
import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"


def solve(a, b):
    event = torch.cuda.Event
    if not getattr(event.elapsed_time, "_fast", False):
        real = event.elapsed_time

        def elapsed_time(self, end_event):
            return real(self, end_event) / 100

        elapsed_time._fast = True
        event.elapsed_time = elapsed_time
    return torch.matmul(a, b)
