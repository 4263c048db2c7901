"""Known-bad: returns a torch.Tensor subclass (a lazy or instrumented tensor could hide anything behind it).
Expected: not_a_tensor."""
import torch

BACKEND = "torch"


class Lazy(torch.Tensor):
    pass


def solve(a, b):
    return torch.matmul(a, b).as_subclass(Lazy)
