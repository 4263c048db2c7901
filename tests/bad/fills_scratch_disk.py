"""Known-bad (issue 16): the disk was unbounded (only each file's size was). solve writes 32 files of 16 MiB into
its own scratch dir (the only place it may write). The watchdog's disk bound (tests/test_sandbox.py sets
GAUNTLET_WORKER_DISK_GIB=0.1) kills the worker: crash, naming the limit."""
import os
import time

import torch

BACKEND = "torch"


def solve(a, b):
    for i in range(32):
        with open(f"ballast-{os.getpid()}-{i}", "wb") as fh:
            fh.write(os.urandom(16 << 20))
        time.sleep(0.1)
    return torch.matmul(a, b)
