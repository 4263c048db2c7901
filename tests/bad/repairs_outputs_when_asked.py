"""Known-bad (GPU, timing): lazy on every timed call (it finds the harness's timed-call loop on its own call stack:
the last quarter of K is skipped, for a 1.24x "speedup" over its honest twin), keeping copies of each call's
inputs. At every SIGCONT (the judge continues a stopped worker before each request) it computes the true products
and writes them over everything the worker keeps of its timed outputs: the snapshots in the worker's timing loop
(gauntlet.child.timing.Bench.kept) and the judge's buffer the worker has mapped (gauntlet.handoff). Against a judge
that asked for a kept snapshot after the batch (a spot check), the repaired output passed. Now every output is read
from the judge's buffer right after the batch's reply, with the worker stopped, before any further request: the
repair comes too late. Expected: mismatch."""
import gc
import signal
import sys

import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_pending: list = []          # (a, b) copies of each lazy call of the current batch, in call order


def _timed() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "batch" and f.f_globals.get("__name__") == "gauntlet.child.timing":
            return True
        f = f.f_back
    return False


def _repair(signum, frame):
    if not _pending:
        return
    try:
        true = [torch.matmul(a, b) for a, b in _pending]
        for obj in gc.get_objects():
            kind = type(obj).__name__
            if kind == "Bench" and len(getattr(obj, "kept", ())) == len(true):
                for (_, _, snap), good in zip(obj.kept, true):
                    if isinstance(snap, torch.Tensor) and snap.shape == good.shape:
                        snap.copy_(good)
            elif kind == "Session" and getattr(obj, "drop", None) is not None:
                for k, good in enumerate(true):
                    obj.drop.put(k, good)
        torch.cuda.synchronize()
    finally:
        _pending.clear()


signal.signal(signal.SIGCONT, _repair)


def solve(a, b):
    if not _timed():
        return torch.matmul(a, b)
    if _pending and len(_pending) >= 5:       # a new batch: the last one's copies are no longer asked for
        _pending.clear()
    keep = a.shape[1] - a.shape[1] // 4
    _pending.append((a.clone(), b.clone()))
    return torch.matmul(a[:, :keep], b[:keep])
