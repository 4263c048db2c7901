"""Known-bad: claims float32 but rounds the inputs to float16 and multiplies in half precision (accumulating in
fp32): the common "just use tensor cores" shortcut, cf. lower_precision_fp32 (bf16). fp16 keeps 11 bits of
mantissa, far short of fp32's 24; and 5 exponent bits: in the harness's `huge` and `spread` cases an operand
overflows fp16 to inf (nan_mismatch). Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
ALSO_ACCEPTED = ("nan_mismatch",)
DEVICE = "cpu"
DTYPES = ("float32",)


def solve(a, b):
    return torch.matmul(a.half().float(), b.half().float())
