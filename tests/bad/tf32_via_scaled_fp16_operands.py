"""Known-bad: the smarter form of tf32_via_fp16_operands: each operand is first scaled by a power of two so that its
largest value sits at 2**14, then rounded to fp16 (exact scaling, so no overflow and no loss for a tensor whose
values span fp16's 30-odd binades), and the product is scaled back. A `huge` or `tiny` case does not catch it: the
whole tensor moves together. A `spread` case does (harness/inputs.py: rows of one tensor 2**-30 to 2**30 apart,
more than fp16 holds): the small rows underflow to 0 and their outputs are lost. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
ALSO_ACCEPTED = ("nan_mismatch",)
DEVICE = "cpu"
DTYPES = ("tf32",)


def _fp16_scaled(x):
    amax = x.abs().amax().clamp_min(torch.finfo(torch.float32).tiny)
    shift = torch.floor(torch.log2(amax)) - 14
    return (x * torch.exp2(-shift)).half().float(), shift


def solve(a, b):
    a16, sa = _fp16_scaled(a)
    b16, sb = _fp16_scaled(b)
    return torch.matmul(a16, b16) * torch.exp2(sa + sb)
