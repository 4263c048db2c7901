"""Known-bad (GPU): a torch solution that turns TF32 on for float32 inside solve
(torch.set_float32_matmul_precision("high"), the same switch as torch.backends.cuda.matmul.allow_tf32 = True):
tensor cores with 10-bit mantissas, ~8x faster than true fp32 on an H100, and ~2**13 times less accurate. The
harness sets the precision to "highest" around each call (and restores it afterwards), but the candidate flips it
again inside. Calling a setting is not patching a function, so the tamper watch does not fire (the harness could
also compare the precision after the call with the one it set); the values fail the fp32 tolerance.
Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cuda"
DTYPES = ("float32",)


def solve(a, b):
    torch.set_float32_matmul_precision("high")
    return torch.matmul(a, b)
