"""Known-bad (issue 16): 50 processes forked inside one call. Here 200 children that sleep 30 s each, all alive at
once (reaped by nobody). The watchdog's process bound (64 beside the worker) kills the tree: crash, naming the limit."""
import os
import time

import torch

BACKEND = "torch"


def solve(a, b):
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        time.sleep(0.002)
    return torch.matmul(a, b)
