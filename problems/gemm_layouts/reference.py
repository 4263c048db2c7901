"""GEMM with transposed operand views, the specification: C = op(A) @ op(B), C (M, N).

`make_inputs` returns A with shape (M, K) and B with shape (K, N) whatever the layout, but for a "T" side the
tensor is the transposed VIEW of a contiguous tensor (strides (1, M) for A, (1, K) for B), exactly what a user
holds when computing x @ W.t() or dY.t() @ X. A solution must honour the strides it is given. The output is a new
contiguous (M, N) tensor.
"""
import torch

from gauntlet.inputs import exact_matmul_operands, fma_chain_matmul

LAYOUTS = ("NT", "TN", "NN")


def make_inputs(shape, dtype, seed, device):
    """Seeded inputs made on the device. Rows of A and columns of B are scaled by 2**k, k in [-3, 3], so a kernel
    that mixes up rows or columns (a stride taken for the wrong dimension, a transposed tile) or drops precision on
    small rows shows it. The values do not depend on the layout; only the memory order does."""
    M, N, K, layout = shape["M"], shape["N"], shape["K"], shape["layout"]
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=g, device=device, dtype=torch.float32)
    b = torch.randn(K, N, generator=g, device=device, dtype=torch.float32)
    row_scale = torch.exp2(torch.randint(-3, 4, (M, 1), generator=g, device=device).float())
    col_scale = torch.exp2(torch.randint(-3, 4, (1, N), generator=g, device=device).float())
    a = (a * row_scale).to(dtype)
    b = (b * col_scale).to(dtype)
    # "T": store the transpose contiguously and hand over its .t() view: same values, column-major memory.
    a = a.t().contiguous().t() if layout[0] == "T" else a.contiguous()
    b = b.t().contiguous().t() if layout[1] == "T" else b.contiguous()
    return a, b


def make_exact_inputs(shape, dtype, seed, device):
    """float32's exact-arithmetic cases (gauntlet.inputs; as problems/gemm), in the case's layout."""
    M, N, K, layout = shape["M"], shape["N"], shape["K"], shape["layout"]
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    g = torch.Generator(device=device).manual_seed(seed)
    a, b = exact_matmul_operands((), M, N, K, g, device)
    a, b = a.to(dtype), b.to(dtype)
    a = a.t().contiguous().t() if layout[0] == "T" else a.contiguous()
    b = b.t().contiguous().t() if layout[1] == "T" else b.contiguous()
    return a, b


def reference(a, b):
    return a @ b


def sequential_order(a, b):
    """The product in the plainest fp32 order (one accumulator per output, k in order, fused multiply-adds): the
    judge's control for an output bit-identical to torch's own (gauntlet.judge.values.origin)."""
    return fma_chain_matmul(a, b)


def rows(index, a, b):
    """The inputs whose reference is rows `index` (dim -2) of this call's: the judge checks a few sampled rows of
    every timed output against the oracle of just those rows (gauntlet.judge.values.sampled)."""
    return a[index], b


def factors(a, b):
    """(X, Y) in float64 with the oracle = X @ Y: the judge checks every timed output with a random projection,
    r^T C against (r^T X) Y (Freivalds; gauntlet.judge.values.sampled)."""
    return a.double(), b.double()


def error_scale(a, b):
    """Per-element magnitude that rounding error scales with: sqrt((A*A) @ (B*B))_ij, as for the plain GEMM.
    Called on float64 inputs."""
    return ((a * a) @ (b * b)).sqrt()


def _ignores_strides(a, b):
    """A kernel that ignores the strides and reads each operand's memory as row-major with the logical shape: what
    a pointer-only kernel written for NN computes on an NT/TN view. (Identical to the answer on NN, so the generic
    negative-control test, which takes the first layout choice, must see a transposed one: choices start with NT.)"""
    def misread(x):
        if x.is_contiguous():
            return x
        storage = x.t().contiguous()              # the memory as it lies (the contiguous tensor the view came from)
        return storage.reshape(x.shape)           # the same memory read row-major with the view's shape
    return misread(a) @ misread(b)


def _transposed_output(a, b):
    """C^T written into a C-shaped buffer: the output layout confused with an operand's."""
    c = a @ b
    return c.t().contiguous().reshape(c.shape)


def negative_controls():
    return {"ignores_strides": _ignores_strides, "transposed_output": _transposed_output}
