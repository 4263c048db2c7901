"""Known-bad: host memory held where no resident set shows it. solve writes 256 MiB at a time, up to 6 GiB, into a
new memfd each time (RLIMIT_FSIZE bounds one file at 1 GiB, not their number) through its descriptor (never
mapped) and keeps the descriptors: the pages belong to the file, not to any process's mappings, so the sum of the
worker's PSS stays small. The judge's watchdog reads the worker's fd folder (gauntlet.judge.sandbox.usage) and
kills the tree at its limit (tests/test_sandbox.py sets GAUNTLET_WORKER_RAM_GIB=1.5): crash, naming the limit."""
import os
import time

import torch

BACKEND = "torch"
_held = []


def solve(a, b):
    chunk = b"\1" * (256 << 20)
    for _ in range(24):
        fd = os.memfd_create("hoard")
        _held.append(fd)
        os.write(fd, chunk)
        time.sleep(0.05)             # the watch reads fd folders once a second: a fast hoard is still caught,
    time.sleep(3)                    # this one leaves it the time to be, and holds the pages while it looks
    return torch.matmul(a, b)
