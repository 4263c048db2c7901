"""Known-bad (issue 16): a baseline worker killed by the candidate left the record without timing instead of a
rejection, and a candidate with a poor ratio gains by leaving none. This one computes the product twice (about 0.5x
cuBLAS) and, on every call, sends SIGKILL to its judge's baseline worker (its sibling: a process of the same parent
whose command line says `baseline`; judges running beside it are left alone).
Confined, the signals are refused (Landlock's signal scope: only its own domain) and its honest, poor ratio stands;
unconfined, the baseline worker dies and the record gets `tampering` (gauntlet.judge.timing.timed). Judged on a GPU with
timing by tests/test_sandbox.py."""
import os
import signal

import torch

BACKEND = "torch"


def _kill_baselines():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            if b"gauntlet.child.worker" in argv and b"baseline" in argv and ppid == os.getppid():
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            continue


def solve(a, b):
    _kill_baselines()
    torch.matmul(a, b)
    return torch.matmul(a, b)
