"""Known-bad: plants a file in the problem's folder on disk (a later process importing the problem would read
what the candidate wrote; a subtler one edits reference.py). Expected: tampering (the judge hashes the harness,
the problem's files and its baselines around every candidate)."""
from pathlib import Path

import torch

BACKEND = "torch"
MARKER = Path(__file__).resolve().parents[2] / "problems" / "gemm" / "_planted_by_candidate.py"


def solve(a, b):
    MARKER.write_text("# planted by a candidate\n")
    return torch.matmul(a, b)
