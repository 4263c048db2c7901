"""Known-bad (issue 16): a candidate that sleeps just under the per-call limit on every call held one judge for
about two hours per dtype, and passed. The judgement's total time limit (`--time-limit`; tests/test_sandbox.py
uses a 3 s call limit and a 12 s total) ends it: timeout, naming the total."""
import time

import torch

BACKEND = "torch"


def solve(a, b):
    time.sleep(2.5)
    return torch.matmul(a, b)
