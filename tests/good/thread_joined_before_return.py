"""Known-good, unusual: splits the rows of C between the calling thread and a worker thread, and joins the worker
before returning. Threads are fine; threads still running after solve returns are not (bad/background_thread.py).
Expected: pass."""
import threading

import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cpu"


def solve(a, b):
    M = a.shape[0]
    c = torch.empty(M, b.shape[1], dtype=a.dtype, device=a.device)
    half = M // 2

    def lower():
        c[half:] = torch.matmul(a[half:], b)

    worker = threading.Thread(target=lower, name="gemm-lower-half")
    worker.start()
    if half:
        c[:half] = torch.matmul(a[:half], b)
    worker.join()
    return c
