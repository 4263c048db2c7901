"""MoE expert GEMM on tokens already sorted by expert (a "grouped GEMM"), the specification.

Inputs, in this order:
    x    (M, K)  activations, contiguous, storage dtype (bf16 / fp16). Row i is one (token, expert) pair: the
                 routed rows are already permuted so that the rows of expert 0 come first, then expert 1, ...
    w    (E, N, K) expert weights, contiguous, same dtype: w[e] is expert e's nn.Linear weight (out x in).
    offs (E,)    int32, the cumulative END offsets of the experts' row ranges: expert e owns rows
                 [offs[e-1], offs[e]) (with offs[-1] read as 0 for e = 0). offs is non-decreasing and
                 offs[E-1] == M, so every row belongs to exactly one expert. An expert with no tokens has
                 offs[e] == offs[e-1] (an empty group); M may be smaller than E.
Output:
    out  (M, N)  same dtype: out[rows_e] = x[rows_e] @ w[e].T for every expert e.

This is exactly the convention of torch._grouped_mm(x, w.transpose(-2, -1), offs=offs) (2-D x 3-D with int32
end offsets), which is one of the baselines. The length E of offs equals w.shape[0].

Routing (the `routing` dim) decides how make_inputs draws the per-expert token counts from the seed:
    uniform         each row picks an expert uniformly at random (a balanced top-k router after load balancing;
                    counts are multinomial, so with M < E many experts are empty and many hold a single row)
    zipf            expert probabilities follow a power law p ~ 1 / rank**1.2 over a random permutation of the
                    experts (a skewed router: with E = 32 the busiest expert gets ~30% of the rows)
    one_hot_expert  every row goes to one expert, drawn at random; all the others are empty
    with_empty      about half of the experts are empty, always including the first and the last when E >= 3
                    (leading / trailing empty groups; with E = 2 one of the two); rows spread uniformly over the
                    rest
"""
import torch

ROUTINGS = ("uniform", "zipf", "one_hot_expert", "with_empty")
ZIPF_S = 1.2


def _expert_probs(routing, E, g, device):
    """Per-expert probabilities (float64, summing to 1, exact zeros for experts that must stay empty)."""
    if routing == "uniform":
        return torch.ones(E, dtype=torch.float64, device=device)
    if routing == "zipf":
        ranks = torch.randperm(E, generator=g, device=device).to(torch.float64) + 1.0
        return ranks.pow(-ZIPF_S)
    if routing == "one_hot_expert":
        p = torch.zeros(E, dtype=torch.float64, device=device)
        p[torch.randint(0, E, (1,), generator=g, device=device)] = 1.0
        return p
    if routing == "with_empty":
        keep = torch.rand(E, generator=g, device=device) < 0.5
        if E >= 3:
            keep[0] = False
            keep[-1] = False
            forced = 1 + torch.randint(0, E - 2, (1,), generator=g, device=device)   # one busy expert inside
        else:
            forced = torch.randint(0, E, (1,), generator=g, device=device)
            keep[:] = False                                   # E = 2: exactly one busy, one empty
        keep[forced] = True
        return keep.to(torch.float64)
    raise ValueError(f"unknown routing {routing!r}; known: {ROUTINGS}")


def make_offsets(routing, M, E, g, device):
    """int32 cumulative end offsets (E,) with offs[-1] == M, drawn from the generator."""
    p = _expert_probs(routing, E, g, device)
    expert_of_row = torch.multinomial(p / p.sum(), M, replacement=True, generator=g)
    counts = torch.bincount(expert_of_row, minlength=E)
    return torch.cumsum(counts, 0).to(torch.int32)


def make_inputs(shape, dtype, seed, device):
    """Seeded inputs made on the device. Values are not only randn: every row of x and every output channel
    (row) of every expert's weight is scaled by its own 2**k, k in [-3, 3], so a kernel that uses the wrong
    expert's weights, or reads rows across an expert boundary, moves the output by powers of two. The weights
    carry 1/sqrt(K) like an initialised nn.Linear, so |out| stays O(100) and fp16 never overflows."""
    M, N, K, E, routing = shape["M"], shape["N"], shape["K"], shape["E"], shape["routing"]
    g = torch.Generator(device=device).manual_seed(seed)
    offs = make_offsets(routing, M, E, g, device)
    x = torch.randn(M, K, generator=g, device=device, dtype=torch.float32)
    x = x * torch.exp2(torch.randint(-3, 4, (M, 1), generator=g, device=device).float())
    w = torch.randn(E, N, K, generator=g, device=device, dtype=torch.float32)
    w = w * (torch.exp2(torch.randint(-3, 4, (E, N, 1), generator=g, device=device).float()) / K ** 0.5)
    return x.to(dtype).contiguous(), w.to(dtype).contiguous(), offs


def _groups(offs):
    """(expert, start, end) for every non-empty expert (one host sync: fine for the spec, not for a kernel)."""
    start = 0
    for e, end in enumerate(offs.tolist()):
        if end > start:
            yield e, start, end
        start = end


def reference(x, w, offs):
    out = torch.zeros(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
    for e, start, end in _groups(offs):
        out[start:end] = x[start:end] @ w[e].T
    return out


def error_scale(x, w, offs):
    """sqrt((x*x) @ (w[e]*w[e]).T) on each expert's rows: the root-sum-square of the K products summed into each
    output element (rounding errors of random sign add in quadrature), as for the dense GEMM problem. float64."""
    scale = torch.zeros(x.shape[0], w.shape[1], dtype=torch.float64, device=x.device)
    for e, start, end in _groups(offs):
        xe = x[start:end].to(torch.float64)
        we = w[e].to(torch.float64)
        scale[start:end] = ((xe * xe) @ (we * we).T).sqrt()
    return scale


def _shifted_ends(offs, delta):
    """Every expert boundary moved by `delta` rows, clamped to [0, M], the last end kept at M."""
    M = int(offs[-1])
    shifted = (offs.to(torch.int64) + delta).clamp(0, M)
    shifted[-1] = M
    return shifted.to(torch.int32)


def negative_controls():
    """Wrong answers a plausible grouped-GEMM bug produces; the checker must reject each one."""
    def ignores_offsets(x, w, offs):
        # every row multiplied by expert 0's weights, as if the group schedule were never read
        return x @ w[0].T

    def off_by_one_boundary(x, w, offs):
        # the last row of every expert computed with the next expert's weights (end offsets read one short)
        return reference(x, w, _shifted_ends(offs, -1))

    def offsets_read_as_starts(x, w, offs):
        # offs taken as START offsets: expert e gets rows [offs[e], offs[e+1]), i.e. the rows of expert e+1; the
        # rows before offs[0] are never written (zero)
        E = w.shape[0]
        bounds = offs.tolist() + [x.shape[0]]
        out = torch.zeros(x.shape[0], w.shape[1], dtype=x.dtype, device=x.device)
        for e in range(E):
            if bounds[e + 1] > bounds[e]:
                out[bounds[e]:bounds[e + 1]] = x[bounds[e]:bounds[e + 1]] @ w[e].T
        return out

    def skips_last_group(x, w, offs):
        # the schedule drops the last non-empty expert (its rows are left at zero)
        out = reference(x, w, offs)
        groups = list(_groups(offs))
        _, start, end = groups[-1]
        out[start:end] = 0
        return out

    return {"ignores_offsets": ignores_offsets, "off_by_one_boundary": off_by_one_boundary,
            "offsets_read_as_starts": offsets_read_as_starts, "skips_last_group": skips_last_group}
