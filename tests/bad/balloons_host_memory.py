"""Known-bad: with host memory unbounded, the kernel's OOM killer may pick the judge. solve touches 256 MiB of host
memory at a time, up to 6 GiB, and keeps it. The judge's watchdog (gauntlet.judge.process.watchdog) kills the worker's
tree at its limit (tests/test_sandbox.py sets GAUNTLET_WORKER_RAM_GIB=1.5): crash, naming the limit."""
import torch

BACKEND = "torch"
_hoard = []


def solve(a, b):
    for _ in range(24):
        _hoard.append(bytearray(256 << 20))       # bytearray zero-fills: the pages are really resident
    return torch.matmul(a, b)
