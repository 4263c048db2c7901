"""A KernelBench level-2-style file for gemm_bias_gelu: nn.Linear then exact GELU, in plain torch. Its Linear is
initialised at random (and with sizes of its own): it can only pass if the adapter puts the problem's weight and
bias in place of the module's own parameters, as the mapping in problems/gemm_bias_gelu/problem.yaml says."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64, 32]
