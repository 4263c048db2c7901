"""Known-bad: a Triton-labelled file that does its product with torch.mm inside a profiler range it opens itself,
named as the harness names the interpreter's launches (`gauntlet::launch::<kernel>`), hoping the judge counts the
range as a kernel of its own and the aten::mm inside it as the kernel's work. On the CPU the harness opens its launch
ranges under a nonce the judge picks for each call and keeps a ledger of them (gauntlet.child.launches); a range it
did not open is forged, and every op inside any range is judged by the allowlist anyway. (On the GPU the kernel names
give it away.) Expected: forbidden_op."""
import torch
import triton
import triton.language as tl
from torch.profiler import record_function

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cpu"
DTYPES = ("float32",)


@triton.jit
def _gemm_kernel(x_ptr, n, BLOCK: tl.constexpr):       # named like a real kernel, never launched
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def solve(a, b):
    with record_function("gauntlet::launch::_gemm_kernel"):
        return torch.mm(a, b)
