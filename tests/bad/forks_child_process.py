"""Known-bad: forks a child process in solve that keeps running (here it only sleeps 30 s, standing in for work
that finishes the output after the timer stops, or a process that outlives the judge). The worker lists its live
child processes after each call. Expected: background_work (the harness kills the child's process group
afterwards, which takes the forked process with it)."""
import os
import time

import torch

BACKEND = "torch"
EXPECTED = "background_work"
DEVICE = "cpu"


def solve(a, b):
    c = torch.matmul(a, b)
    pid = os.fork()
    if pid == 0:                        # the forked child: never returns into the harness's code
        try:
            time.sleep(30)
        finally:
            os._exit(0)
    return c
