"""Dense GEMM, the specification: C = A @ B with A (M, K) and B (K, N), both contiguous.

The reference is the plain PyTorch statement of the math. The harness runs it in float64 as the oracle and in the
input dtype to learn how wrong torch itself is at that precision.
"""
import torch


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
    """float32's exact-arithmetic cases (harness.inputs picks a quarter of float32 calls): every product and every
    partial sum of A @ B is exactly representable in fp32, so any order of true fp32 arithmetic gives the exact
    answer and the judge asks for it; bf16x3, TF32 and fp16 operands miss it."""
    g = torch.Generator(device=device).manual_seed(seed)
    a, b = _exact_operands((), shape["M"], shape["N"], shape["K"], g, device)
    return a.to(dtype).contiguous(), b.to(dtype).contiguous()


# Exact-arithmetic operands (significant bits of A, of B, nonzero products per output): the sum of |products| stays
# under 2**23, so every partial sum is exact in fp32. 20 and 18 bits are past bf16x3's 16 (and TF32's and fp16's
# 11); 11 x 11 bits are exact in a bf16 hi/lo split but its dropped lo*lo product is not.
EXACT_RECIPES = ((20, 1, 4), (18, 2, 4), (11, 11, 2))


def _exact_operands(lead, M, N, K, g, device):
    """float32 A (*lead, M, K) and B (*lead, K, N) whose every product and partial sum is exact in fp32: A dense
    with integers below 2**bits, B with at most `terms` nonzero integers below 2**b_bits per column (at random
    rows), then scaled by powers of two (rows of A, columns of B in 2**[-3, 3]), which keeps them exact."""
    bits, b_bits, terms = EXACT_RECIPES[int(torch.randint(0, len(EXACT_RECIPES), (1,), generator=g,
                                                           device=device))]
    a = torch.randint(1 - 2**bits, 2**bits, (*lead, M, K), generator=g, device=device).float()
    mag = torch.randint(1, 2**b_bits, (*lead, K, N), generator=g, device=device).float()
    sign = torch.where(torch.rand(*lead, K, N, generator=g, device=device) < 0.5, -1.0, 1.0)
    keys = torch.rand(*lead, K, N, generator=g, device=device)
    rank = keys.argsort(dim=-2, stable=True).argsort(dim=-2, stable=True)
    b = torch.where(rank < terms, mag * sign, 0.0)
    row = torch.exp2(torch.randint(-3, 4, (*lead, M, 1), generator=g, device=device).float())
    col = torch.exp2(torch.randint(-3, 4, (*lead, 1, N), generator=g, device=device).float())
    return a * row * 2.0**-bits, b * col * 2.0**-b_bits


def reference(a, b):
    return a @ b


def error_scale(a, b):
    """Per-element magnitude that rounding error scales with: sqrt((A*A) @ (B*B))_ij, the root-sum-square of the
    products summed into C_ij. Rounding errors of random sign add in quadrature, so an honest kernel's error grows
    like this, while the worst-case factor |A| @ |B| grows like K and would let a lower-precision kernel through.
    Called on float64 inputs."""
    return ((a * a) @ (b * b)).sqrt()
