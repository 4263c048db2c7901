"""A KernelBench-style file for gemm_bias_gelu whose module holds a parameter the problem does not give (a learned
scale): the problem's inputs cannot replace all of its parameters, so it is an import_error naming them."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.ones(out_features))

    def forward(self, x):
        return F.gelu(self.linear(x)) * self.scale


def get_init_inputs():
    return [64, 32]
