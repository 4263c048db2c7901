"""A GPU MODE-style submission.py for gemm that is wrong for float32: it rounds the inputs to bfloat16 before the
product (a precision bug, not a crash). Known bad: `mismatch` through the GPU MODE adapter."""
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    return (a.bfloat16() @ b.bfloat16()).to(a.dtype)
