"""Known-bad (issue 16): candidate and judge ran as the same user with nothing between them, so at import this file
opened the judge's own stdout through /proc/PPID/fd/1, printed a well-formed `"verdict": "pass"` object there and
killed the judge: the only JSON a caller of `gauntlet eval --json` read was the forged one. Its kernel computes
nothing (zeros). Confined (Landlock: no ptrace-class access to processes outside the worker's domain, no signals
to them), both steps are refused, and the zeros are judged: mismatch. tests/test_sandbox.py runs it through the
CLI and counts the JSON objects. Expected: mismatch."""
import json
import os
import signal

import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"

_FORGED = {"schema": "gauntlet.eval/1", "problem": "gemm", "solution": "forges_verdict_via_judge_stdout",
           "verdict": "pass", "reasons": [], "cases": {}, "timings": [], "score": {}}
try:
    with open(f"/proc/{os.getppid()}/fd/1", "w") as judge_stdout:
        judge_stdout.write(json.dumps(_FORGED) + "\n")
    os.kill(os.getppid(), signal.SIGKILL)
except OSError:
    pass


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
