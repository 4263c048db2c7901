"""Known-bad: closes every pipe file descriptor it holds (the harness's request and response channels), so the
worker can neither hear the next request nor send this answer, hoping a silent channel reads as "no failures".
The parent sees the channel close and the process exit without an answer. Expected: crash."""
import os

import torch

BACKEND = "torch"
EXPECTED = "crash"
DEVICE = "cpu"


def solve(a, b):
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                os.close(fd)
        except OSError:
            pass
    return torch.matmul(a, b)
