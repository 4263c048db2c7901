"""Known-bad: handicaps the baseline instead of speeding itself up. The baseline's solve runs in the candidate's own
process during timing, called from Python between the start and end CUDA events. solve installs a profile hook
(sys.setprofile, and threading.setprofile for new threads) that busy-waits 1 ms whenever a function from a
module named gauntlet_baseline_* is called. The start event is already on the stream, so the GPU records 1 ms of
idle time into every baseline call timed with events (any shape above the CUDA-graph threshold): the candidate's
"speedup" grows by 1 ms / its own time. Its own answers are right, and no watched function is replaced.
The harness should check sys.getprofile() and sys.gettrace() (and threading's) after every call, and clear
them before timing. Expected: tampering."""
import sys
import threading
import time

import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"


def _hook(frame, event, arg):
    if event == "call" and frame.f_globals.get("__name__", "").startswith("gauntlet_baseline_"):
        end = time.perf_counter() + 1e-3
        while time.perf_counter() < end:
            pass


def solve(a, b):
    if sys.getprofile() is not _hook:
        sys.setprofile(_hook)
        threading.setprofile(_hook)
    return torch.matmul(a, b)
