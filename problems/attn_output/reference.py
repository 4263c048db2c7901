"""Attention output, the specification: O = P @ V, batched over heads, with grouped-query attention.

P is (B, Hq, Sq, Sk), attention probabilities (each row nonnegative and summing to 1, up to the rounding of the
input dtype), V is (B, Hkv, Sk, D), both contiguous, with Hq = Hkv * G: query head h reads kv head h // G. The output
O is (B, Hq, Sq, D) in the input dtype. Accumulation is meant to be fp32: the harness runs this reference in float64
as the oracle and in the input dtype to learn torch's own error. The dims name the group size G rather than Hq, so
every drawn shape is a valid GQA shape.
"""
import torch


def make_inputs(shape, dtype, seed, device):
    """Seeded inputs made on the device.

    P: each row is softmax(T * z) for z ~ randn over its keys, computed in fp32 and then rounded to the dtype, with a
    temperature T drawn per row from {0, 1/2, 2, 8}: T = 0 is a flat row (1/Sk everywhere, the summation-accuracy
    case), T = 8 is peaked (a few keys carry almost all the weight, the rest are tiny or underflow to 0). Half the
    rows are causally truncated: only a random prefix of the keys is visible and the rest of the row is exactly 0,
    as a masked softmax leaves it.
    V: randn with every key row scaled by a power of two in 2**[-2, 2] and a few feature columns by 2**[0, 2] (rows
    of different magnitude: a kernel that mixes up keys, heads or the GQA mapping shows it)."""
    B, Hkv, G, Sq, Sk, D = (shape[d] for d in ("B", "Hkv", "G", "Sq", "Sk", "D"))
    Hq = Hkv * G
    g = torch.Generator(device=device).manual_seed(seed)
    z = torch.randn(B, Hq, Sq, Sk, generator=g, device=device)
    temps = torch.tensor([0.0, 0.5, 2.0, 8.0], device=device)
    t = temps[torch.randint(0, 4, (B, Hq, Sq, 1), generator=g, device=device)]
    visible = torch.randint(1, Sk + 1, (B, Hq, Sq, 1), generator=g, device=device)     # prefix length, >= 1
    truncate = torch.rand(B, Hq, Sq, 1, generator=g, device=device) < 0.5
    keys = torch.arange(Sk, device=device)
    masked = truncate & (keys >= visible)
    p = torch.softmax((t * z).masked_fill(masked, float("-inf")), dim=-1)
    v = torch.randn(B, Hkv, Sk, D, generator=g, device=device)
    v = v * torch.exp2(torch.randint(-2, 3, (B, Hkv, Sk, 1), generator=g, device=device).float())
    v = v * torch.exp2(torch.randint(0, 3, (1, 1, 1, D), generator=g, device=device).float())
    return p.to(dtype).contiguous(), v.to(dtype).contiguous()


def reference(p, v):
    """What eager attention code writes: expand V to the query heads, then one batched matmul."""
    group = p.shape[1] // v.shape[1]
    return torch.matmul(p, v.repeat_interleave(group, dim=1))   # kv head h // group serves query head h


def rows(index, p, v):
    """The inputs whose reference is rows `index` (dim -2) of this call's: the judge checks a few sampled rows of
    every timed output against the oracle of just those rows (gauntlet.judge.values.sampled)."""
    return p[..., index, :], v


def factors(p, v):
    """(X, Y) in float64 with the oracle = X @ Y: the judge checks every timed output with a random projection,
    r^T C against (r^T X) Y (Freivalds; gauntlet.judge.values.sampled)."""
    group = p.shape[1] // v.shape[1]
    return p.double(), v.double().repeat_interleave(group, dim=1)


def error_scale(p, v):
    """Per-element magnitude rounding error scales with: sqrt(sum_j (p_ij v_jd)^2), the root-sum-square of the Sk
    products summed into O_id (a GEMM's scale, as in problems/gemm; output rounding is budgeted apart through
    |O|). Rounding errors of random sign add in quadrature, so an honest fp32-accumulating kernel's error grows
    like this, while sum_j p_ij |v_jd| would let a kernel that rounds P or V further through. Called on float64."""
    group = p.shape[1] // v.shape[1]
    return torch.matmul(p * p, (v * v).repeat_interleave(group, dim=1)).sqrt()
