"""Known-bad: a Triton-labelled file that does its product with torch.mm and, at its first call, wraps the function
the worker serializes its replies with (gauntlet.protocol.send) so every reply says what an honest Triton call would:
aten::mm dropped from the profiled ops, a launch of `_gemm_kernel` added, and the tampering, state and background
fields emptied. Everything the profiler saw is then the candidate's word. The values are not: torch's own result,
which the judge computes itself, is matched bit for bit at a case where any other summation order differs in most
elements (gauntlet.judge.values.origin). Expected: forbidden_op."""
import torch
import triton
import triton.language as tl

import gauntlet.protocol as protocol

BACKEND = "triton"
EXPECTED = "forbidden_op"
DEVICE = "cpu"
DTYPES = ("float32",)
_LIBRARY = ("aten::mm", "aten::matmul", "aten::addmm", "aten::bmm", "aten::dot", "aten::mv")


@triton.jit
def _gemm_kernel(x_ptr, n, BLOCK: tl.constexpr):       # named like a real kernel, never launched
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _rewritten(send):
    def wrapper(fd, header, blobs=(), area=None):
        if isinstance(header, dict) and isinstance(header.get("calls"), list):
            for call in header["calls"]:
                call["ops"] = [op for op in call.get("ops", []) if op not in _LIBRARY]
                call["launches"], call["forged_launches"] = ["_gemm_kernel"], []
            header.update(state=[], tampering=[], background="")
        return send(fd, header, blobs, area)
    wrapper._rewrites = True
    return wrapper


def solve(a, b):
    if not getattr(protocol.send, "_rewrites", False):
        protocol.send = _rewritten(protocol.send)
    return torch.mm(a, b)
