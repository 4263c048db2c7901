"""Known-bad: never returns. Expected: timeout (the harness kills its process group)."""
import time

BACKEND = "torch"


def solve(a, b):
    while True:
        time.sleep(1)
