"""Known-bad: writes the answer into input A's storage and returns a view of it (saves an allocation).
Expected: output_aliases_input."""
import torch

BACKEND = "torch"


def solve(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.matmul(a, b)
    if M * K < M * N:
        return c
    view = torch.as_strided(a, (M, N), (N, 1))
    view.copy_(c)
    return view
