"""What both sides need to make a call's inputs: regenerate them from a seed, under the dtype's matmul precision.

Shared by the parent (which regenerates every input itself to judge) and the children (which regenerate them to
call solve): neither trusts the other's copy.
"""
from __future__ import annotations

import contextlib

import torch

from harness.problem import DtypeSpec, Problem

@contextlib.contextmanager
def matmul_precision(spec: DtypeSpec):
    """float32 means true fp32; the `tf32` dtype entry is where TF32 is allowed. Solutions read
    torch.get_float32_matmul_precision() to know which one they are being judged on."""
    before = torch.get_float32_matmul_precision()
    cudnn_before = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high" if spec.tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = spec.tf32
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
        torch.backends.cudnn.allow_tf32 = cudnn_before


def make_inputs(problem: Problem, shape: dict, spec: DtypeSpec, seed: int, device: str) -> tuple:
    inputs = problem.module().make_inputs(dict(shape), spec.torch_dtype(), int(seed), device)
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
