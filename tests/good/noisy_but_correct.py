"""Known-good, unusual: prints about 100 MB to stdout on its first call (debug output left in, progress bars) and a
little on every call after, then returns the right answer. The child's stdout and stderr go to a log file, never
the harness channel or the CLI's JSON, so the noise must not break the run. Expected: pass."""
import sys

import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cpu"

_first = True


def solve(a, b):
    global _first
    if _first:
        _first = False
        line = "x" * 1023 + "\n"
        for _ in range(100):                       # 100 x 1 MiB
            sys.stdout.write(line * 1024)
        sys.stdout.flush()
    print(f"debug: a {tuple(a.shape)} b {tuple(b.shape)}", flush=True)
    print("debug: " + "y" * 4096, file=sys.stderr, flush=True)
    return torch.matmul(a, b)
