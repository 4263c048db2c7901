"""Known-bad: claims float32 but emulates it with three bf16 GEMMs ("bf16x3"): each operand split into a bf16 high
part and a bf16 low part (16 significant bits in all), and A_hi B_hi + A_hi B_lo + A_lo B_hi summed with fp32
accumulation, as bf16 tensor cores compute each (the products of bf16 values are exact in fp32, so an fp32 matmul
of bf16-valued operands is what the tensor cores give). About 2**-16 relative per product, 256 times fp32's unit
roundoff: the norm-wise budget (8 x torch's error + 64 u) let it through on random inputs, and on the GPU only
the roofline check stopped it. float32 admits true fp32 products only (README, Correctness): the exact-arithmetic
cases (harness/inputs.py, a quarter of float32 calls; operands with 18 and 20 significant bits) have one right
answer, which this misses. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"
DTYPES = ("float32",)


def _split(x):
    hi = x.to(torch.bfloat16)
    lo = (x - hi.float()).to(torch.bfloat16)
    return hi.float(), lo.float()


def solve(a, b):
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    return torch.matmul(a_hi, b_hi) + (torch.matmul(a_hi, b_lo) + torch.matmul(a_lo, b_hi))
