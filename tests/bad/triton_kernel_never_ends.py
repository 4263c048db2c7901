"""Known-bad (GPU): a Triton kernel that spins forever on a flag nobody sets (a lost handshake in a persistent or
stream-K kernel). The host blocks in torch.cuda.synchronize and the GPU stays busy; only killing the process frees
the device. Expected: timeout (the harness kills the child's process group; the GPU context dies with it)."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "timeout"
DEVICE = "cuda"
DTYPES = ("float32",)


@triton.jit
def _spin(flag_ptr, out_ptr):
    ready = tl.load(flag_ptr, volatile=True)
    while ready == 0:
        ready = tl.load(flag_ptr, volatile=True)
    tl.store(out_ptr, ready)


def solve(a, b):
    flag = torch.zeros(1, dtype=torch.int32, device=a.device)
    out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    _spin[(1,)](flag, out)
    return out
