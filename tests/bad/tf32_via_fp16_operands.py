"""Known-bad: claims tf32 but rounds both operands to fp16 and multiplies with fp32 accumulation, as fp16 tensor
cores do (fp16 keeps the same 10 stored mantissa bits as TF32, and an fp16 GEMM is about 1.3x faster than cuBLAS's
TF32 on an H100). fp16 has 5 exponent bits to TF32's 8: values past 65504 become inf and values under 2**-24
become 0. The problems' own inputs never left fp16's range, so this passed every case; the harness's magnitude
cases (harness/inputs.py: `huge`, `tiny`, `spread`, 7 calls in 12 for tf32) take it out of range, on the CPU as on
the GPU. Expected: mismatch (or nan_mismatch, where an operand overflowed to inf)."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
ALSO_ACCEPTED = ("nan_mismatch",)
DEVICE = "cpu"
DTYPES = ("tf32",)


def solve(a, b):
    return torch.matmul(a.half().float(), b.half().float())
