"""How much device memory one fuzzed case takes, and whether the device in hand can hold it.

A problem's fuzz bounds cap the product of its dims (work), not memory: bmm's cuda domain allows B*M*N*K = 4e9, which
with K = 1 is a 4e9-element output, and the judge's fp64 oracle of that is 32 GB before its error scale and comparison
temporaries, which with them outgrow an 80 GB card in the judge's process alone. So the case budget also comes from the
device: every case is sized to fit the memory that is free when the judgement starts, shared by the judge (this process)
and the candidate's worker (same GPU).

The estimate is derived from the problem's own `bytes` formula, evaluated once for the inputs alone and once for
the output alone, in fp64 (the oracle's precision) and in the storage dtype:
- judge: the inputs regenerated in the storage dtype, upcast to fp64, and two fp64 temporaries of the error scale
  (A*A and B*B for a GEMM): 1 x in + 3 x in64; per call of the case still remembered (the judge keeps the
  expectations of the case's earlier calls, to recognise an answer that belongs to one of them:
  gauntlet.judge.evaluate) the fp64 oracle, the fp64 error scale and torch's answer: calls x (2 x out64 + out);
  the candidate's output and one more fp64 output-sized temporary while the oracle is built: out64 + out; and
  the comparison's workspace, about sixteen fp64 temporaries of one slab (gauntlet.judge.values.check.CHUNK_ELEMENTS),
  however large the output.
- worker: the inputs and outputs of every call of the case alive at once (outputs are kept across calls to catch
  one that aliases an earlier one), the pristine copy of the inputs, the copy of the output it sends
  (gauntlet.child.guard.as_seen), and room for a workspace as large as the output in fp32:
  (calls + 1) x (in + out) + out + out32.
Only a fraction of the free memory is used (allocator fragmentation, CUDA contexts, the baseline worker), and
where several judges share one GPU (pytest -n on a GPU runner, parallel `gauntlet run --problem ...`), set
GAUNTLET_JUDGES_PER_GPU to their number: each then sizes its cases to its share. (The worker reads it too, once
at start-up, for its straggler limit only: gauntlet.child.worker.)
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

USABLE = 0.8


@dataclass(frozen=True)
class MemoryBudget:
    device: str
    free_bytes: int

    share: int = 1

    @property
    def usable(self) -> int:
        return int(self.free_bytes * USABLE / self.share)


def device_budget(device: str) -> MemoryBudget | None:
    """The memory free now on `device` (host RAM for cpu), this judge's share of it; None when it cannot be read."""
    share = judges_per_gpu()
    try:
        if device == "cuda":
            free, _total = torch.cuda.mem_get_info()
            return MemoryBudget(device, int(free), share)
        pages = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return MemoryBudget(device, int(pages), share)
    except (RuntimeError, ValueError, OSError, AttributeError):
        return None


def judges_per_gpu() -> int:
    """gauntlet.gpu.judges_per_gpu, with a malformed value made the user's error."""
    from ... import gpu
    from ...discover import UsageError
    try:
        return gpu.judges_per_gpu()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def case_bytes(problem, shape: dict, element_bytes: int, calls: int) -> int:
    """Estimated peak bytes of one case, judge and worker together (see the module docstring)."""
    from .check import CHUNK_ELEMENTS
    in64, out64 = problem.bytes(shape, 8, 0), problem.bytes(shape, 0, 8)
    in_d, out_d = problem.bytes(shape, element_bytes, 0), problem.bytes(shape, 0, element_bytes)
    workspace = 16 * 8 * min(out64 / 8, CHUNK_ELEMENTS)
    judge = in_d + 3 * in64 + calls * (2 * out64 + out_d) + out64 + out_d + workspace
    worker = (calls + 1) * (in_d + out_d) + out_d + out64 / 2
    return int(judge + worker)


def fits_predicate(problem, element_bytes: int, budget: MemoryBudget | None):
    """shape -> bool, or None when there is no budget to hold shapes to."""
    if budget is None:
        return None
    calls = problem.calls_per_case
    return lambda shape: case_bytes(problem, shape, element_bytes, calls) <= budget.usable


def too_big(problem, shape: dict, element_bytes: int, budget: MemoryBudget | None) -> str:
    """Why the device cannot hold this case ('' when it can): the case's size and what is free."""
    if budget is None:
        return ""
    need = case_bytes(problem, shape, element_bytes, problem.calls_per_case)
    if need <= budget.usable:
        return ""
    share = f", shared by {budget.share} judges" if budget.share > 1 else ""
    return (f"the case needs about {need / 2**30:.1f} GiB of {budget.device} memory (judge and candidate), and "
            f"{budget.free_bytes / 2**30:.1f} GiB are free ({USABLE:.0%} of it usable{share})")
