"""The baseline: torch.matmul on the very views it is given. cuBLAS takes a transposed operand as a flag (its
column-major view of a row-major .t() is just the other op), so no copy is made. For the `tf32` dtype the harness
sets torch's float32 matmul precision to "high", so this same line uses TF32."""
import torch

BACKEND = "torch"


def solve(a, b):
    return torch.matmul(a, b)


def describe(a, b):
    return f"torch.matmul on views with strides A{tuple(a.stride())} B{tuple(b.stride())}"
