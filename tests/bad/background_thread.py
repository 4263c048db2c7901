"""Known-bad: returns an empty buffer and finishes the product on a background thread after solve returns (on the
GPU the same trick uses a side stream), so a timer sees no work. Expected: background_work."""
import threading
import time

import torch

BACKEND = "torch"


def solve(a, b):
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)

    def finish():
        time.sleep(0.2)
        out.copy_(torch.matmul(a, b))

    threading.Thread(target=finish, daemon=True).start()
    return out
