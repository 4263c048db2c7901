"""Known-bad: returns torch.empty(M, N) and never writes it, hoping the allocator hands back a block that still
holds the answer. Seen in the AI CUDA Engineer results (Sakana, 2025): a "kernel" that did no work passed because
the evaluator ran the reference first in the same process, freed its output, and the caching allocator handed
that very block to the candidate's torch.empty, still holding the right values. Gauntlet computes the reference in
the parent process, so no block in the child ever holds this call's answer: the output is whatever the allocator
had lying around (freed inputs of earlier calls, or fresh zeroed pages from mmap).

On the CPU that garbage is finite floats (old inputs) or zeros, so the report is a value mismatch; on the GPU it can
also be NaN bit patterns (nan_mismatch). Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"


def solve(a, b):
    return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
