"""Batched GEMM, the specification: C[b] = A[b] @ B[b], A (B, M, K) and B (B, K, N) contiguous, C (B, M, N).

The reference is the plain PyTorch statement of the math (torch.bmm). The harness runs it in float64 as the oracle
and in the input dtype to learn how wrong torch itself is at that precision.
"""
import torch

from gauntlet.inputs import exact_matmul_operands, fma_chain_matmul


def make_inputs(shape, dtype, seed, device):
    """Seeded inputs made on the device. Besides randn, each batch, each row of A[b] and each column of B[b] is
    scaled by 2**k (k in [-3, 3] for rows/columns, [-4, 0] per batch): a kernel that reads another batch's data, or
    mixes up rows, gets values of the wrong magnitude; one that loses precision on small batches or rows shows it.
    The batch scale only shrinks, so |C| stays under 2**6 * sqrt(K) * ~5 (3e4 at K = 9000), inside fp16's range."""
    nb, M, N, K = shape["B"], shape["M"], shape["N"], shape["K"]
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(nb, M, K, generator=g, device=device, dtype=torch.float32)
    b = torch.randn(nb, K, N, generator=g, device=device, dtype=torch.float32)
    batch_scale = torch.exp2(torch.randint(-4, 1, (nb, 1, 1), generator=g, device=device).float())
    row_scale = torch.exp2(torch.randint(-3, 4, (nb, M, 1), generator=g, device=device).float())
    col_scale = torch.exp2(torch.randint(-3, 4, (nb, 1, N), generator=g, device=device).float())
    a = a * row_scale * batch_scale
    b = b * col_scale
    return a.to(dtype).contiguous(), b.to(dtype).contiguous()


def make_exact_inputs(shape, dtype, seed, device):
    """float32's exact-arithmetic cases (gauntlet.inputs; as problems/gemm): every product and partial sum of each
    batch's A @ B is exactly representable in fp32, so the judge asks for the exact answer."""
    g = torch.Generator(device=device).manual_seed(seed)
    a, b = exact_matmul_operands((shape["B"],), shape["M"], shape["N"], shape["K"], g, device)
    return a.to(dtype).contiguous(), b.to(dtype).contiguous()


def reference(a, b):
    return torch.bmm(a, b)


def sequential_order(a, b):
    """The product in the plainest fp32 order (one accumulator per output, k in order, fused multiply-adds): the
    judge's control for an output bit-identical to torch's own (gauntlet.judge.values.origin)."""
    return fma_chain_matmul(a, b)


def rows(index, a, b):
    """The inputs whose reference is rows `index` (dim -2) of this call's: the judge checks a few sampled rows of
    every timed output against the oracle of just those rows (gauntlet.judge.values.sampled)."""
    return a[:, index], b


def factors(a, b):
    """(X, Y) in float64 with the oracle = X @ Y: the judge checks every timed output with a random projection,
    r^T C against (r^T X) Y (Freivalds; gauntlet.judge.values.sampled)."""
    return a.double(), b.double()


def error_scale(a, b):
    """Per-element magnitude that rounding error scales with: sqrt((A*A) @ (B*B)) batch by batch, the
    root-sum-square of the products summed into C[b]_ij. Called on float64 inputs."""
    return torch.bmm(a * a, b * b).sqrt()


def _first_batch_everywhere(a, b):
    """Every batch computed from batch 0's operands: a batch offset that is never applied."""
    return torch.bmm(a[:1].expand_as(a), b[:1].expand_as(b))


def _batches_swapped(a, b):
    """A's batches paired with B's in reverse order: the batch index taken from the wrong end of the grid."""
    return torch.bmm(a, b.flip(0))


def negative_controls():
    return {"first_batch_everywhere": _first_batch_everywhere, "batches_swapped": _batches_swapped}
