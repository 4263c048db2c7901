"""Hypothesis strategies over a problem's shape domain, and the one-line case spec used to replay a failure.

Shapes mix the values that break kernels (1, primes, tile sizes and their neighbours) with uniform draws. A budget
on the product of the dims lets one dim run long, past every tile size, while the others stay small; the order in
which dims are drawn is itself drawn, so each dim gets its turn at being the long one.

Most draws are aligned: every integer dim a multiple of one drawn alignment (8 to 128). Fast kernels
branch on alignment (TMA needs 16-byte rows, vectorised loads need multiples of 8 or 16), and the aligned branch is
the one real shapes take; independent draws rarely align the dims that matter at once (int8_gemm's TMA condition,
K % 16 == 0 and N % 4 == 0, holds in a few percent of them), so a judgement of independent draws alone can miss a
TMA kernel's fast path entirely (docs/benchmarks.md).

The opposite corner is large and misaligned at once: a kernel whose fast path covers the 16-aligned bulk of a
big output and mishandles the tail (never writes the last N % 16 columns when M * N is large) met it only in
independent draws that happened to be large in two dims, and in no edge case (those are large in one dim, or
aligned). So one draw in twelve is LARGE (it takes half the independent draws' share; aligned draws keep 10 in
12): two or more dims (drawn) share the budget, each in the top half of its share and a multiple of 64 plus or
minus 1..15 (`_large_misaligned`), and the edge cases end with the wide case (`_wide_case`: gemm's CPU domain
M = N = 383, K = 9; on its CUDA domain M = N = 4499, K = 197). The LARGE draws take large-and-misaligned shapes
from rare to a few percent of draws while the aligned shares stay about as they are (docs/benchmarks.md);
tests/bad/triton_skips_n_tail_when_large.py.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from ...discover import UsageError
from ...problem import FuzzBounds

PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 131, 251, 257, 509, 521, 1021, 2039, 4093)
TILE_EDGES = tuple(sorted({t + d for t in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096) for d in (-1, 0, 1)}))


ALIGNMENTS = (8, 16, 32, 64, 128)
LARGE = "large"          # the draw mode where several dims are near the budget's top and misaligned at once
REMAINDERS = tuple(range(1, 16))


def _large_misaligned(lo: int, hi: int):
    """A value in the top half of [lo, hi] that is a multiple of 64 (16 below 128) plus or minus 1..15, so not a
    multiple of 16 (unless [lo, hi] holds no such value): the tail a kernel's fast path leaves to a masked loop, at
    a size where the fast path runs."""
    step = 64 if hi >= 128 else 16
    q_lo, q_hi = max(1, -(-max(lo, hi // 2) // step)), hi // step
    if hi < 17 or q_hi < q_lo:
        return st.integers(lo, hi)

    def place(t):
        q, r, sign = t
        v = q * step + sign * r
        return v if lo <= v <= hi else q * step - r if q * step - r >= lo else max(lo, min(hi, v))
    return st.tuples(st.integers(q_lo, q_hi), st.sampled_from(REMAINDERS), st.sampled_from((1, -1))).map(place)


def _dim_values(lo: int, hi: int, align: int = 0):
    """A value in [lo, hi]: a multiple of `align` when one is given and the range holds one, else a special value
    (1, a prime, a tile size or its neighbour, the top) or a uniform draw."""
    if align and hi // align >= -(-lo // align):
        q_lo, q_hi = -(-lo // align), hi // align
        return st.one_of(st.integers(q_lo, q_hi), st.sampled_from(sorted({q_lo, q_hi}))).map(lambda q: q * align)
    special = sorted({v for v in (1, *PRIMES, *TILE_EDGES, hi) if lo <= v <= hi})
    options = [st.integers(lo, hi)]
    if special:
        options.insert(0, st.sampled_from(special))
    return st.one_of(*options)


def fit(shape: dict, bounds: FuzzBounds, fits=None) -> dict | None:
    """`shape`, or the nearest smaller one the device can hold: the largest integer dim is halved (never below its
    lower bound) until `fits` accepts it. None when even the smallest does not fit. Shrinking, not rejecting, keeps
    Hypothesis from discarding most draws on domains whose work budget allows more memory than the device has."""
    if fits is None or fits(shape):
        return shape
    shape = dict(shape)
    ranged = [d for d, b in bounds.dims.items() if isinstance(b, tuple)]
    while not fits(shape):
        movable = [d for d in ranged if shape[d] > bounds.dims[d][0]]
        if not movable:
            return None
        dim = max(movable, key=lambda d: shape[d])
        shape[dim] = max(bounds.dims[dim][0], shape[dim] // 2)
    return shape


@st.composite
def shapes(draw, bounds: FuzzBounds, valid=None, fits=None):
    """A dict dim -> value within the bounds, the budget and (with `fits`) the device's memory."""
    ranged = [d for d, b in bounds.dims.items() if isinstance(b, tuple)]
    order = draw(st.permutations(ranged))
    align = draw(st.sampled_from((0, LARGE, *ALIGNMENTS, *ALIGNMENTS)))     # 0: unaligned; aligned 10 in 12
    # LARGE: the first n_large dims of the order share the budget (each near the n-th root of what is left) and
    # are misaligned; the others are drawn as usual in what remains.
    n_large = draw(st.integers(min(2, len(ranged)), len(ranged))) if align == LARGE and ranged else 0
    shape, product = {}, 1
    for i, dim in enumerate(order):
        lo, hi = bounds.dims[dim]
        rest_min = math.prod(bounds.dims[d][0] for d in order[i + 1:])
        hi = max(lo, min(hi, bounds.budget // max(1, product * rest_min)))
        if i < n_large:
            share = bounds.budget / max(1, product * rest_min) * math.prod(bounds.dims[d][0]
                                                                           for d in order[i + 1:n_large])
            shape[dim] = draw(_large_misaligned(lo, max(lo, min(hi, int(share ** (1 / (n_large - i)))))))
        else:
            shape[dim] = draw(_dim_values(lo, hi, 0 if align == LARGE else align))
        product *= shape[dim]
    for dim, b in bounds.dims.items():
        if not isinstance(b, tuple):
            shape[dim] = draw(st.sampled_from(b))
    ordered = fit({d: shape[d] for d in bounds.dims}, bounds, fits)
    from hypothesis import assume
    assume(ordered is not None)
    if valid is not None:
        assume(valid(ordered))
    return ordered


EDGE_CASES_MAX = 10


def edge_cases(bounds: FuzzBounds, valid=None, fits=None) -> list[dict]:
    """The domain's ends, tried before any random draw: each integer dim in turn at the largest odd value it can
    take and at its top (within the budget, the other dims at their lowest), so a bug that only shows there (an
    accumulator that overflows past some K, a tail that is only wrong for odd sizes) is met in every judgement,
    whatever the number of examples. Then one case that is large in every dim at once: the dim with the longest
    range at its largest odd value and the others as large (and odd) as the budget then allows. With every other dim
    at 1 there is one output element, and a kernel that accumulates in too narrow a type (fp16 partial sums over a
    long K) can stay inside the budget of that one element; over a whole tile of outputs it does not (`gauntlet
    mutate` on gemm finds fp16 accumulation passing every other edge case and random draws). Then the same case with
    every dim rounded down to a multiple of 64 (`_aligned`), so a kernel's aligned fast path is judged at a large
    size too, not only its tails. Choice dims take their
    first choice. With `fits`, an end the device cannot hold is brought down to one it can (see `fit`)."""
    ranged = [d for d, b in bounds.dims.items() if isinstance(b, tuple)]
    base = {d: (b[0] if isinstance(b, tuple) else b[0]) for d, b in bounds.dims.items()}
    odd, top = [], []
    for dim in ranged:
        lo, hi = bounds.dims[dim]
        rest = math.prod(base[d] for d in ranged if d != dim)
        hi = max(lo, min(hi, bounds.budget // max(1, rest)))
        largest_odd = hi if hi % 2 else hi - 1
        if largest_odd >= lo and largest_odd != base[dim]:
            odd.append(dict(base, **{dim: largest_odd}))
        if hi != largest_odd:
            top.append(dict(base, **{dim: hi}))
    full = [_full_case(bounds, base, ranged)] if len(ranged) > 1 else []
    aligned = [_aligned(c, bounds) for c in full]
    wide = [_wide_case(bounds, base, ranged)] if len(ranged) > 1 else []
    cases, seen = [], set()
    # The odd ends first: they break more kernels than the even ones. The wide case last, where there is room.
    for case in odd + full + aligned + top + wide:
        case = fit(case, bounds, fits)
        if case is None:
            continue
        key = tuple(case.items())
        if key not in seen and (valid is None or valid(case)):
            seen.add(key)
            cases.append(case)
    return cases[:EDGE_CASES_MAX]


def _aligned(case: dict, bounds: FuzzBounds) -> dict:
    """The all-dims case with each integer dim rounded down to a multiple of 64 (or, below 64, to a power of two)
    where its range allows: the aligned fast path (TMA, vector loads) at a large size, in every judgement."""
    out = dict(case)
    for d, b in bounds.dims.items():
        if isinstance(b, tuple):
            v = case[d]
            a = 64 if v >= 64 else 1 << (v.bit_length() - 1)
            if v // a * a >= b[0]:
                out[d] = v // a * a
    return out


def _odd_at_most(value: int, lo: int) -> int:
    return value if value % 2 or value - 1 < lo else value - 1


def _wide_case(bounds: FuzzBounds, base: dict, ranged: list) -> dict:
    """Every dim but the longest-range one at the largest odd value the budget leaves them together (odd: never a
    multiple of 16), the longest one with the rest: gemm's CPU domain gives M = N = 383, K = 9. The full case keeps
    the outputs small (35 x 35 there) and the aligned one aligned, so a kernel that mishandles the misaligned tail
    of a large output (the last N % 16 columns, say, only when M * N is large) passed every other edge."""
    long = max(ranged, key=lambda d: bounds.dims[d][1] - bounds.dims[d][0])
    others = [d for d in ranged if d != long]
    room = bounds.budget // max(1, bounds.dims[long][0])
    side = max(1, int(room ** (1 / len(others))))
    case = dict(base)
    for d in others:
        o_lo, o_hi = bounds.dims[d]
        case[d] = _odd_at_most(max(o_lo, min(o_hi, side)), o_lo)
    while math.prod(case[d] for d in others) * bounds.dims[long][0] > bounds.budget:
        d = max(others, key=lambda k: case[k])
        if case[d] <= bounds.dims[d][0]:
            break
        case[d] -= 2 if case[d] - 2 >= bounds.dims[d][0] else 1
    lo, hi = bounds.dims[long]
    case[long] = _odd_at_most(max(lo, min(hi, bounds.budget // max(1, math.prod(case[d] for d in others)))), lo)
    return case


def _full_case(bounds: FuzzBounds, base: dict, ranged: list) -> dict:
    """The longest-range dim at its largest odd value, the others balanced (odd where they can be) in the budget."""
    def odd_at_most(value, lo):
        return value if value % 2 or value - 1 < lo else value - 1

    long = max(ranged, key=lambda d: bounds.dims[d][1] - bounds.dims[d][0])
    others = [d for d in ranged if d != long]
    lo, hi = bounds.dims[long]
    rest_min = math.prod(bounds.dims[d][0] for d in others)
    case = dict(base, **{long: odd_at_most(max(lo, min(hi, bounds.budget // max(1, rest_min))), lo)})
    room = bounds.budget // case[long]
    side = max(1, int(room ** (1 / len(others))))
    for d in others:
        o_lo, o_hi = bounds.dims[d]
        case[d] = odd_at_most(max(o_lo, min(o_hi, side)), o_lo)
    while math.prod(case[d] for d in ranged) > bounds.budget:     # rounding of the root: step the others down
        d = max(others, key=lambda k: case[k])
        if case[d] <= bounds.dims[d][0]:
            break
        case[d] -= 1
    return case


def seeds():
    return st.integers(min_value=0, max_value=2**31 - 1)


def call_seeds(case_seed: int, calls: int) -> list[int]:
    """Fresh inputs for each call of one case, derived so that a replay gets the same ones."""
    return [(case_seed + 1_000_003 * i) % 2**31 for i in range(calls)]


def format_case(shape: dict, seed: int) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items()) + f",seed={seed}"


def parse_case(text: str, dims: list) -> tuple[dict, int]:
    """'M=257,N=3,K=300,seed=12' -> ({'M': 257, 'N': 3, 'K': 300}, 12)."""
    items = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise UsageError(f"--case: expected KEY=VALUE, got {part!r}")
        items[key.strip()] = value.strip()
    missing = [d for d in dims if d not in items]
    unknown = [k for k in items if k not in dims and k != "seed"]
    if missing or unknown:
        raise UsageError(f"--case: missing {missing}, unknown {unknown}; expected {', '.join(dims)} and seed")
    shape = {d: int(items[d]) if items[d].lstrip("-").isdigit() else items[d] for d in dims}
    seed = items.get("seed", "0")
    if not seed.isdigit() or not 0 <= int(seed) < 2**31:
        raise UsageError(f"--case: seed must be an integer in [0, 2**31), got {seed!r}")
    return shape, int(seed)


def check_case(text: str, problem, device: str, element_bytes: int | None = None) -> None:
    """A replayed case must lie in the problem's domain on this device: each dim within its fuzz bounds (or one of
    its choices), and the case's size within the device's budget and (given the dtype's element size) its free
    memory. Refused with its size, as a usage error."""
    shape, _ = parse_case(text, problem.dims)
    why = outside_domain(shape, problem, device)
    if not why and element_bytes:
        from . import memory
        why = memory.too_big(problem, shape, element_bytes, memory.device_budget(device))
    if why:
        raise UsageError(f"--case: {why}")


def outside_domain(shape: dict, problem, device: str) -> str:
    """Why `shape` is not a case of this problem on this device ('' when it is)."""
    if sorted(shape) != sorted(problem.dims):
        return f"dims {sorted(shape)} are not the problem's {problem.dims}"
    bounds = problem.fuzz.get(device) or problem.fuzz["cpu"]
    for d, b in bounds.dims.items():
        value = shape[d]
        if isinstance(b, tuple):
            if not isinstance(value, int) or not b[0] <= value <= b[1]:
                return f"{d}={value!r} is outside the {device} domain [{b[0]}, {b[1]}] of problem {problem.id}"
        elif value not in [str(c) for c in b] and value not in b:
            return f"{d}={value!r} is not one of {b} for problem {problem.id}"
    size = math.prod(shape[d] for d, b in bounds.dims.items() if isinstance(b, tuple))
    if size > bounds.budget:
        return (f"the product of the dims is {size:,}, over the {device} budget {bounds.budget:,} of problem "
                f"{problem.id} (this device cannot be asked to hold it)")
    return ""


def repro(record, spec, shape, seed) -> str:
    """The command that replays one case of a judgement (a KernelBench or GPU MODE file with its format, and the
    backend it was told, so the replay reads the file as the judgement did)."""
    adapter = getattr(record, "adapter", None) or {}
    how = (f" --format {adapter['format']}" if adapter.get("format") else "") + (
        f" --backend {adapter['backend']}" if adapter.get("backend_from") == "--backend" else "")
    return (f"gauntlet eval {record.problem} {record.path} --device {record.device} --dtype {spec.name}{how} "
            f"--case '{format_case(shape, seed)}'")
