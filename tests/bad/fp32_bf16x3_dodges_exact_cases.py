"""Known-bad: claims float32 but computes bf16x3 (three bf16 products over a hi/lo split of each operand, about
2**-16 relative per product), and falls back to true fp32 wherever that would show: when the inputs look like the
exact-arithmetic cases (sparse B, or operands with few significant bits) and when the output is tiny. The random
cases' budget lets bf16x3 through; the float32 net case (one fixed random case per float32 judgement, K = 1024, judged
on its norm-wise error against torch's own, gauntlet.judge.values.net) does not, in every judgement. Expected:
mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"
DTYPES = ("float32",)


def _split(x):
    hi = x.to(torch.bfloat16).float()
    return hi, (x - hi).to(torch.bfloat16).float()


def _looks_exact(x):
    """Operands of the exact cases: mostly zeros, or every value an integer below 2**21 times a power of two."""
    if x.numel() == 0 or float((x == 0).float().mean()) > 0.5:
        return True
    _, exp = torch.frexp(x)
    scaled = torch.ldexp(x, 21 - exp)                   # 21 significant bits as an integer
    return bool((scaled == scaled.round()).all())


def solve(a, b):
    if a.shape[0] * b.shape[1] < 64 or _looks_exact(a) or _looks_exact(b):
        return a @ b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    return a_hi @ b_hi + (a_hi @ b_lo + a_lo @ b_hi)
