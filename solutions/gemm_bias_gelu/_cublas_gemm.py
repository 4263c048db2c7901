"""The `cublas_gemm` reference time: the plain GEMM A @ W^T alone, no bias and no GELU.

NOT a solution (its output is not C, so it would fail the check; the leading underscore keeps it out of the
solutions that `gauntlet run` and pytest judge). The problem's `baselines` names it so the timing reports the bare
cuBLAS GEMM beside the fused kernel: the candidate's speedup against it shows what the epilogue costs (a speedup
close to 1 means the bias + GELU came for free).
"""
import torch

BACKEND = "torch"


def solve(a, w, bias):
    return torch.matmul(a, w.t())


def describe(a, w, bias):
    return "torch.matmul(A, W.t()) only: the GEMM without bias or GELU (less work; a reference time, not an answer)"
