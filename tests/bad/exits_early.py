"""Known-bad: exits with status 0 from inside solve, hoping an early clean exit reads as a pass. Expected: crash."""
import os

BACKEND = "torch"


def solve(a, b):
    print('{"verdict": "pass"}')    # a fake verdict on stdout, which the harness never reads
    os._exit(0)
