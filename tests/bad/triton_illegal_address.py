"""Known-bad (GPU): a Triton kernel that stores far outside its output (a 64-bit offset bug: row * stride computed
past the allocation), so the GPU raises an illegal memory access. The CUDA context is sticky-broken afterwards:
every later CUDA call in that process fails. The run must go on: the fault stays in the child's context.
Expected: crash."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "crash"
DEVICE = "cuda"
DTYPES = ("float32",)


@triton.jit
def _bad_store(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    far = offs.to(tl.int64) + (1 << 40)                  # ~4 TiB past the buffer: unmapped
    tl.store(c_ptr + far, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


def solve(a, b):
    c = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    n = c.numel()
    _bad_store[(triton.cdiv(n, 128),)](c, n, BLOCK=128)
    torch.cuda.synchronize()
    return c
