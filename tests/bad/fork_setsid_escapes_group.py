"""Known-bad: forks a child that calls os.setsid(), leaving the worker's process group and session, so killing the
worker's process group on timeout or exit would not reach it. It is still the worker's child, so the worker's
listing of its children (/proc/self/task/*/children) sees it. (See double_fork_daemon for the variant that is not
a child any more.) The forked process closes its inherited descriptors and exits after 30 s on its own.
Expected: background_work."""
import os
import time

import torch

BACKEND = "torch"
EXPECTED = "background_work"
DEVICE = "cpu"


def solve(a, b):
    c = torch.matmul(a, b)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.closerange(3, 4096)      # do not hold the harness's pipes open
            time.sleep(30)
        finally:
            os._exit(0)
    return c
