"""Dense GEMM, the specification: C = A @ B with A (M, K) and B (K, N), both contiguous.

The reference is the plain PyTorch statement of the math. The harness runs it in float64 as the oracle and in the
input dtype to learn how wrong torch itself is at that precision.
"""
import torch

from gauntlet.inputs import exact_matmul_operands, fma_chain_matmul


def make_inputs(shape, dtype, seed, device):
    """Seeded inputs made on the device. Values are not only randn: a few rows and columns are scaled by 2**±3 so
    a kernel that mixes up rows, or drops precision on small-magnitude rows, shows it."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=g, device=device, dtype=torch.float32)
    b = torch.randn(K, N, generator=g, device=device, dtype=torch.float32)
    row_scale = torch.exp2(torch.randint(-3, 4, (M, 1), generator=g, device=device).float())
    col_scale = torch.exp2(torch.randint(-3, 4, (1, N), generator=g, device=device).float())
    a = a * row_scale
    b = b * col_scale
    return a.to(dtype).contiguous(), b.to(dtype).contiguous()


def make_exact_inputs(shape, dtype, seed, device):
    """float32's exact-arithmetic cases (gauntlet.inputs picks a quarter of float32 calls): every product and every
    partial sum of A @ B is exactly representable in fp32, so any order of true fp32 arithmetic gives the exact
    answer and the judge asks for it; bf16x3, TF32 and fp16 operands miss it."""
    g = torch.Generator(device=device).manual_seed(seed)
    a, b = exact_matmul_operands((), shape["M"], shape["N"], shape["K"], g, device)
    return a.to(dtype).contiguous(), b.to(dtype).contiguous()


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
    """Per-element magnitude that rounding error scales with: sqrt((A*A) @ (B*B))_ij, the root-sum-square of the
    products summed into C_ij. Rounding errors of random sign add in quadrature, so an honest kernel's error grows
    like this, while the worst-case factor |A| @ |B| grows like K and would let a lower-precision kernel through.
    Called on float64 inputs."""
    return ((a * a) @ (b * b)).sqrt()
