"""A KernelBench-style file for gemm that is wrong: it leaves out the last term of every dot product (plain torch,
so the adapter judges it as a torch solution). Known bad: `mismatch` through the KernelBench adapter."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A[:, :-1], B[:-1, :])


def get_inputs():
    return [torch.randn(64, 32), torch.randn(32, 16)]


def get_init_inputs():
    return []
