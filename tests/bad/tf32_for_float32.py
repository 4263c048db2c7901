"""Known-bad (GPU): a torch solution that turns TF32 on for float32 inside solve
(torch.backends.cuda.matmul.allow_tf32 = True): tensor cores with 10-bit mantissas, ~8x faster than true fp32 on
an H100, and ~2**13 times less accurate. The harness sets the float32 matmul precision to "highest" around each
call (and restores the flag afterwards), but the candidate flips it again inside. Setting a flag is not
patching a function, so the tamper watch does not fire; the values fail the fp32 tolerance. Expected: mismatch."""
import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cuda"
DTYPES = ("float32",)


def solve(a, b):
    torch.backends.cuda.matmul.allow_tf32 = True
    return torch.matmul(a, b)
