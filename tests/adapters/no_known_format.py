"""A file of none of the three formats: no BACKEND/solve, no class ModelNew, no custom_kernel."""
import torch


def matmul(a, b):
    return torch.matmul(a, b)
