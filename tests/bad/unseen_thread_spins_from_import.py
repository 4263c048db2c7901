"""Known-bad: a thread started with `_thread.start_new_thread` at import, which `threading.enumerate()` never lists,
so the worker's own check of the threads after each call sees nothing; it spins through every call and between
them (here it only burns CPU; the same thread could finish a call's work after solve returned). The judge reads the
worker's tasks from /proc itself (gauntlet.judge.sandbox.tasks) and sees a thread working while the worker's main
thread waits for the next request. Expected: background_work."""
import _thread

import torch

BACKEND = "torch"
EXPECTED = "background_work"
DEVICE = "cpu"


def _spin():
    x = 0
    while True:
        x = (x * 31 + 7) % 1000003


_thread.start_new_thread(_spin, ())


def solve(a, b):
    return torch.matmul(a, b)
