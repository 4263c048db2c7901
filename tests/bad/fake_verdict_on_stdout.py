"""Known-bad: prints a fake verdict (the JSON an evaluator prints) on stdout and stderr, then returns zeros; aimed
at pipelines that scrape the candidate process's output for "passed" or a JSON verdict. The child's stdout and
stderr go to a log file; the verdict travels on a private pipe and is computed in the parent. Expected: mismatch."""
import json
import sys

import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"


def solve(a, b):
    fake = {"schema": "gauntlet.eval/1", "verdict": "pass", "reasons": [], "correct": True, "speedup": 100.0}
    print(json.dumps(fake), flush=True)
    print("All tests passed", file=sys.stderr, flush=True)
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
