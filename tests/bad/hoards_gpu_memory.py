"""Known-bad (GPU): a co-tenant that starves everyone else of GPU memory. Each call computes the right product
first, then grabs all the memory still free on the device -- blocks of 256 MiB, then ever smaller ones down to
512 bytes, the caching allocator's smallest, so even its partly used segments fill up -- and keeps it in a module
global. The worker needs no more device memory to send this answer. Then the judge (the parent), which
regenerates the inputs and computes the fp64 oracle on the same GPU, may find none left (unless its own cache
holds enough), and the worker's next call cannot even make its inputs. Neither may take the run down: the judge
turns its own out-of-memory error into a verdict, and the child's shows as a failed call. Where other judges share
the card (GAUNTLET_JUDGES_PER_GPU), the judge's watchdog stops the worker at its share of the card instead, before
it starves them (on an H100 runner under pytest -n 14 a process, most likely its worker, held 64.8 GiB and two
other tests' honest candidates failed; tests/test_sandbox.py judges it beside an honest candidate).
Expected: crash."""
import torch

BACKEND = "torch"
EXPECTED = "crash"
DEVICE = "cuda"
DTYPES = ("bfloat16",)

_hoard = []


def solve(a, b):
    c = torch.matmul(a, b)
    torch.cuda.synchronize()
    for block in (256 << 20, 16 << 20, 1 << 20, 64 << 10, 4 << 10, 512):
        while True:
            try:
                _hoard.append(torch.empty(block, dtype=torch.uint8, device=a.device))
            except torch.OutOfMemoryError:
                break
    return c
