"""Known-bad: returns torch.empty(M, N) and never writes it, hoping the allocator hands back a block that still
holds the answer. Seen in the AI CUDA Engineer results (Sakana, 2025): a "kernel" that did no work passed because
the evaluator ran the reference first in the same process, freed its output, and the caching allocator handed
that very block to the candidate's torch.empty, still holding the right values. Gauntlet computes the reference in
the parent process, so no block in the child ever holds this call's answer: the output is whatever the allocator
had lying around (freed inputs of earlier calls, or fresh zeroed pages from mmap).

Whatever the block holds is reported: usually finite garbage (observed on the CPU: a norm-wise error of 1e34 on
the first, 1x1x1 case) -> mismatch; NaN bit patterns, or a block the worker poisoned with NaN after an earlier
call, -> nan_mismatch. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
ALSO_ACCEPTED = ("nan_mismatch",)
DEVICE = "cpu"


def solve(a, b):
    return torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
