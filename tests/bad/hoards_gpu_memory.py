"""Known-bad (GPU): grabs (almost) all free GPU memory on its first call, in 256 MiB blocks until the allocator
refuses, keeps it in a module global, and still returns the right product (it frees one block for its own output).
A co-tenant starved of memory: here, the worker's next call cannot even allocate its inputs (CUDA OOM -> crash);
the judge (parent), which computes the fp64 oracle on the same GPU, may also hit out-of-memory -- it must not: the
parent should cap or pre-reserve its own memory, or compute the oracle where the child cannot starve it.
Expected: crash."""
import torch

BACKEND = "torch"
EXPECTED = "crash"
DEVICE = "cuda"
DTYPES = ("bfloat16",)

_hoard = []


def solve(a, b):
    if not _hoard:
        while True:
            try:
                _hoard.append(torch.empty(256 << 20, dtype=torch.uint8, device=a.device))
            except torch.OutOfMemoryError:
                break
        need = a.shape[0] * b.shape[1] * a.element_size() + (64 << 20)
        while _hoard and need > 0:
            need -= _hoard.pop().numel()
        torch.cuda.empty_cache()
    return torch.matmul(a, b)
