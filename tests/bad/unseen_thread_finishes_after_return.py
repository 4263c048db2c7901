"""Known-bad: returns an empty buffer and finishes the product on a thread started with `_thread` (absent from
`threading.enumerate()`, so the worker's in-process check finds no thread left running), after solve returned: a
timer sees no work. The judge counts the worker's tasks in /proc before the request and after the reply
(gauntlet.judge.sandbox.tasks): a task that appeared during the call and is still there. Expected: background_work."""
import _thread
import time

import torch

BACKEND = "torch"
EXPECTED = "background_work"
DEVICE = "cpu"


def solve(a, b):
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)

    def finish():
        time.sleep(0.3)
        out.copy_(torch.matmul(a, b))

    _thread.start_new_thread(finish, ())
    return out
