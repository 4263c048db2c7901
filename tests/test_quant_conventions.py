"""The quantized problems admit each common way of computing their quantized values and still reject any change to
the recipe (harness/judge/values/conventions.py; the rule is stated in problems/fp8_gemm_*/reference.py).

Every kernel here is written in torch the way its library writes it, independently of the problem's own
quantizer, and judged in-process on the CPU through the judge's comparison (conventions.value_reasons on
oracle.expected_for), as a candidate's output would be. The tie inputs are built so that the conventions really
differ: each test first asserts that they quantize the inputs to different fp8 values.
"""
import functools

import pytest
import torch
import torch.nn.functional as F

from gauntlet import discover
from gauntlet.inputs import make_inputs
from gauntlet.judge.values import check, conventions
from gauntlet.judge.values.oracle import expected_for
from gauntlet.problem import ProblemError

FP8, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FP8_MAX = 448.0
BLOCK = 128
ROWWISE, BLOCKWISE = "fp8_gemm_rowwise", "fp8_gemm_blockwise"


# --- kernels: each library's way of computing the quantized values, then a GEMM in another order than the reference's


def _where_nonzero(amax, value):
    return torch.where(amax > 0, value, torch.ones_like(amax))


def _divide(t, amax):
    """The stated rule: scale = amax / 448 (tensor operands: IEEE quotients), q from t / scale."""
    scale = _where_nonzero(amax, amax / torch.full_like(amax, FP8_MAX))
    return t / scale, scale


def _vllm_reciprocal(t, amax):
    """vLLM's fp8 quant kernels: inverted_scale = 1.0f / scale, q from t * inverted_scale."""
    scale = _where_nonzero(amax, amax / torch.full_like(amax, FP8_MAX))
    return t * (1.0 / scale), scale


def _torchao_inverse(t, amax):
    """torchao.float8: scale = 448 / amax computed in float64, rounded to fp32; q from t * scale; _scaled_mm is handed
    scale.reciprocal()."""
    inv = _where_nonzero(amax, (FP8_MAX / amax.double()).float())
    return t * inv, inv.reciprocal()


def _torchao_inverse_amax_dequant(t, amax):
    """torchao's quantized values, dequantized by amax / 448 instead of 1 / inv (a scale one fp32 ulp away)."""
    v, _ = _torchao_inverse(t, amax)
    return v, _divide(t, amax)[1]


def _deepgemm_inverse(t, amax):
    """DeepGEMM's per_token_cast_to_fp8: x * (448.0 / x_amax) (torch: reciprocal, then times 448), dequantized by
    x_amax / 448.0."""
    return t * _where_nonzero(amax, 448.0 / amax), _where_nonzero(amax, amax / 448.0)


KERNELS = {  # kernel -> the convention it implements
    "divide": (_divide, "divide"),
    "vllm_reciprocal": (_vllm_reciprocal, "reciprocal"),
    "torchao_inverse": (_torchao_inverse, "inverse_scale"),
    "torchao_inverse_amax_dequant": (_torchao_inverse_amax_dequant, "inverse_scale"),
    "deepgemm_inverse": (_deepgemm_inverse, "inverse_scale_torch"),
}


def _fp8(v, dtype=FP8):
    return v.clamp(-FP8_MAX, FP8_MAX).to(dtype).float()


def _dequant_rows(t, to_range, dtype=FP8):
    t = t.float()
    v, scale = to_range(t, t.abs().amax(dim=1, keepdim=True))
    return _fp8(v, dtype) * scale


def _dequant_blocks(x, to_range, block=BLOCK, dtype=FP8):
    """Activation quantization in 1 x `block` blocks along K (the last one partial), dequantized, fp32."""
    M, K = x.shape
    kb = -(-K // block)
    t = F.pad(x.float(), (0, kb * block - K)).view(M, kb, block)
    v, scale = to_range(t, t.abs().amax(dim=2, keepdim=True))
    return (_fp8(v, dtype) * scale).view(M, kb * block)[:, :K]


def _weight64(w_fp8, w_scale):
    N, K = w_fp8.shape
    ws = w_scale.double().repeat_interleave(BLOCK, dim=0)[:N].repeat_interleave(BLOCK, dim=1)[:, :K]
    return w_fp8.double() * ws


def rowwise_kernel(to_range):
    """Dequantize both operands to fp32, one fp32 GEMM, bf16 out (the reference scales after the fp8 GEMM)."""
    def solve(x, w):
        return (_dequant_rows(x, to_range) @ _dequant_rows(w, to_range).t()).to(x.dtype)
    return solve


def blockwise_kernel(to_range):
    """Dequantize the activation per 1x128 block and the weight per 128x128 block, one fp32 GEMM, bf16 out (the
    reference adds per-K-block partial sums)."""
    def solve(x, w_fp8, w_scale):
        return (_dequant_blocks(x, to_range) @ _weight64(w_fp8, w_scale).float().t()).to(x.dtype)
    return solve


def kernel_for(problem_id, to_range):
    return rowwise_kernel(to_range) if problem_id == ROWWISE else blockwise_kernel(to_range)


# --- inputs where the conventions differ


def _bf16_range(lo_bits, count):
    return (torch.tensor(lo_bits, dtype=torch.int16) + torch.arange(count, dtype=torch.int16)).view(
        torch.bfloat16).float()


@functools.lru_cache(maxsize=None)
def tie_matrix(rows=24):
    """(at most `rows`, L) bf16: each row holds its amax (a bf16 mantissa in [1, 2), times a power of two per row)
    in column 0 and, after it, every bf16 value t in [amax/64, amax) on which two of the problem's conventions
    quantize to different e4m3 values (signs alternating), zero-padded to the longest row. Ties are rare (about 1
    value in 1000 to 4000 of random data), but a few bf16 mantissas of amax have many."""
    module = discover.get_problem(ROWWISE).module()
    amax = _bf16_range(0x3F80, 128)                      # every bf16 in [1, 2)
    t = _bf16_range(0x3C80, 0x3F80 - 0x3C80)             # every bf16 in [2**-6, 1)... and
    t = torch.cat([t, amax])                             # ... in [1, 2)
    A, T = amax[:, None].expand(-1, t.numel()), t[None, :].expand(amax.numel(), -1)
    inside = (T < A) & (T >= A / 64)
    q = [_fp8(module.to_fp8_range(T, A, c)[0]) for c in module.CONVENTIONS]
    differ = torch.zeros_like(inside)
    for i in range(len(q)):
        for j in range(i + 1, len(q)):
            differ |= q[i] != q[j]
    differ &= inside
    count = differ.sum(dim=1)
    best = count.argsort(descending=True)[:rows]
    best = best[count[best] > 0]                          # amax mantissas with at least one tie
    width = 1 + int(count[best].max())
    out = torch.zeros(best.numel(), width)
    for r, i in enumerate(best.tolist()):
        ties = t[differ[i]]
        signs = torch.where(torch.arange(ties.numel()) % 2 == 0, 1.0, -1.0)
        row = torch.cat([amax[i:i + 1], ties * signs]) * 2.0 ** (r % 7 - 3)
        out[r, :row.numel()] = row
    return out.to(torch.bfloat16)


@functools.lru_cache(maxsize=None)
def tie_inputs(problem_id):
    """Inputs whose every output element is one product, so one fp8 step anywhere shows: rowwise x = [[T, 0],
    [0, I]] and w = [[I, 0], [0, T]] (out holds T and T^T, quantized as x and as w); blockwise x = T, w = I (the
    weight is stored quantized, its 128x128 blocks of I exact)."""
    T = tie_matrix()
    R, L = T.shape
    eye, zero = torch.eye(L, dtype=torch.bfloat16), torch.zeros
    if problem_id == ROWWISE:
        x = torch.cat([torch.cat([T, zero(R, L, dtype=T.dtype)], 1), torch.cat([zero(L, L, dtype=T.dtype), eye], 1)])
        w = torch.cat([torch.cat([eye, zero(L, L, dtype=T.dtype)], 1), torch.cat([zero(R, L, dtype=T.dtype), T], 1)])
        return x.contiguous(), w.contiguous()
    assert L <= BLOCK, "each row's ties must share its amax's 1x128 block"
    module = discover.get_problem(BLOCKWISE).module()
    w_fp8, w_scale = module.quantize_weight_128x128(eye)
    return T.contiguous(), w_fp8, w_scale


def _quantized_operands(problem_id, inputs, convention):
    module = discover.get_problem(problem_id).module()
    if problem_id == ROWWISE:
        return [module.quantize_rows(t, convention)[0].view(torch.uint8) for t in inputs]
    return [module.quantize_act_1x128(inputs[0], convention)[0].view(torch.uint8)]


def _every_convention(problem_id, inputs):
    """name -> Expected: the stated convention's expectation and each other one's, as the judge builds them."""
    problem = discover.get_problem(problem_id)
    spec = problem.dtype("float8_e4m3")
    expected = expected_for(problem, inputs, spec)
    assert isinstance(expected, conventions.Admissible)
    return spec, expected, {expected.convention: expected, **{n: make() for n, make in expected.others}}


@pytest.mark.parametrize("problem_id", [ROWWISE, BLOCKWISE])
def test_tie_inputs_tell_the_conventions_apart(problem_id):
    """The premise of the tests below: on the tie inputs every pair of conventions quantizes at least two values
    differently."""
    inputs = tie_inputs(problem_id)
    names = discover.get_problem(problem_id).module().CONVENTIONS
    q = {c: _quantized_operands(problem_id, inputs, c) for c in names}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            n = sum(int((qa != qb).sum()) for qa, qb in zip(q[a], q[b]))
            assert n >= 2, f"{a} and {b} quantize the tie inputs alike ({n} values differ)"


@pytest.mark.parametrize("problem_id", [ROWWISE, BLOCKWISE])
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_each_convention_passes_where_the_others_reject_it(problem_id, kernel):
    """A kernel of any admitted convention passes the judge on the tie inputs, while its output is rejected
    against every other convention's oracle alone: what admits it is its own convention, not a loose budget (and
    against the stated rule alone, the judge before conventions, it failed)."""
    to_range, own = KERNELS[kernel]
    inputs = tie_inputs(problem_id)
    spec, expected, by_name = _every_convention(problem_id, inputs)
    out = kernel_for(problem_id, to_range)(*inputs)
    assert conventions.value_reasons(out, expected, spec) == [], kernel
    assert check.value_reasons(out, by_name[own], spec) == [], kernel
    for name, other in by_name.items():
        if name != own:
            assert check.value_reasons(out, other, spec), f"{kernel} passed against {name} alone"


SHAPES = {ROWWISE: [{"M": 48, "N": 40, "K": 300}, {"M": 67, "N": 67, "K": 67}, {"M": 5, "N": 130, "K": 800}],
          BLOCKWISE: [{"M": 48, "N": 136, "K": 384}, {"M": 67, "N": 67, "K": 67}, {"M": 9, "N": 130, "K": 700}]}


def _inputs(problem_id, shape, seed):
    problem = discover.get_problem(problem_id)
    return make_inputs(problem, shape, problem.dtype("float8_e4m3"), seed, "cpu")


@pytest.mark.parametrize("problem_id", [ROWWISE, BLOCKWISE])
def test_each_convention_passes_on_the_problems_own_inputs(problem_id):
    """make_inputs's data (zero rows and blocks, outliers, partial blocks): every kernel passes the judge; at least
    one case has ties, so that some kernel there fails against the stated rule alone."""
    problem = discover.get_problem(problem_id)
    spec = problem.dtype("float8_e4m3")
    strict_failures = 0
    for shape in SHAPES[problem_id]:
        inputs = _inputs(problem_id, shape, seed=0)
        expected = expected_for(problem, inputs, spec)
        for kernel, (to_range, _) in KERNELS.items():
            out = kernel_for(problem_id, to_range)(*inputs)
            assert conventions.value_reasons(out, expected, spec) == [], (kernel, shape)
            strict_failures += bool(check.value_reasons(out, expected, spec))
    print(f"{problem_id}: {strict_failures} of {len(SHAPES[problem_id]) * len(KERNELS)} kernel calls fail against "
          "the stated rule alone")
    assert strict_failures > 0, "no case had a tie that mattered: the inputs do not exercise the conventions"


# --- recipe changes: each fails under every convention


def _signed_amax(to_range):
    """amax = max(t) instead of max |t| (negative extremes saturate)."""
    def wrong(t, amax):
        return to_range(t, t.amax(dim=-1, keepdim=True).clamp_min(0))
    return wrong


def _bf16_scale(t, amax):
    """The stated rule with the scale rounded to bfloat16, for the quantization and the dequantization."""
    scale = _divide(t, amax)[1].to(torch.bfloat16).float()
    return t / scale, scale


def _per_tensor(t, amax):
    return _divide(t, t.abs().amax().expand_as(amax))


def _rowwise_recipe_changes():
    def dequant_and_gemm(dq):
        return lambda x, w: (dq(x) @ dq(w).t()).to(x.dtype)
    return {
        "no_quantization": dequant_and_gemm(lambda t: t.float()),
        "per_tensor_scale": dequant_and_gemm(lambda t: _dequant_rows(t, _per_tensor)),
        "per_block_1x128": dequant_and_gemm(lambda t: _dequant_blocks(t, _divide)),
        "signed_amax": dequant_and_gemm(lambda t: _dequant_rows(t, _signed_amax(_divide))),
        "amax_of_first_128_columns": dequant_and_gemm(
            lambda t: _dequant_rows(t, lambda v, a: _divide(v, v[:, :BLOCK].abs().amax(dim=1, keepdim=True)))),
        "bf16_scale": dequant_and_gemm(lambda t: _dequant_rows(t, _bf16_scale)),
        "e5m2": dequant_and_gemm(lambda t: _dequant_rows(t, _divide, dtype=E5M2)),
    }


def _blockwise_recipe_changes():
    def with_x(dq):
        return lambda x, w_fp8, w_scale: (dq(x) @ _weight64(w_fp8, w_scale).float().t()).to(x.dtype)
    return {
        "no_quantization": with_x(lambda x: x.float()),
        "per_row_scale": with_x(lambda x: _dequant_rows(x, _divide)),
        "per_tensor_scale": with_x(lambda x: _dequant_rows(x, _per_tensor)),
        "block_1x64": with_x(lambda x: _dequant_blocks(x, _divide, block=64)),
        "block_1x256": with_x(lambda x: _dequant_blocks(x, _divide, block=256)),
        "signed_amax": with_x(lambda x: _dequant_blocks(x, _signed_amax(_divide))),
        "bf16_scale": with_x(lambda x: _dequant_blocks(x, _bf16_scale)),
        "e5m2": with_x(lambda x: _dequant_blocks(x, _divide, dtype=E5M2)),
    }


RECIPE_CHANGES = {ROWWISE: _rowwise_recipe_changes(), BLOCKWISE: _blockwise_recipe_changes()}


@pytest.mark.parametrize("problem_id,change", [(p, c) for p, changes in RECIPE_CHANGES.items() for c in changes])
def test_recipe_change_fails_under_every_convention(problem_id, change):
    """On the problem's own inputs (the first shape crosses several K blocks, so per-row, per-block and block-size
    changes all show), each change to the recipe is rejected by the judge, which tried every convention."""
    problem = discover.get_problem(problem_id)
    spec = problem.dtype("float8_e4m3")
    inputs = _inputs(problem_id, SHAPES[problem_id][0], seed=0)
    out = RECIPE_CHANGES[problem_id][change](*inputs)
    reasons = conventions.value_reasons(out, expected_for(problem, inputs, spec), spec)
    assert reasons, f"{problem_id}: the {change} recipe change passed"
    assert "outside the budget under" in reasons[0].detail      # the other conventions were tried too


@pytest.mark.parametrize("problem_id", [ROWWISE, BLOCKWISE])
def test_problem_negative_controls_fail_under_every_convention(problem_id):
    """The problem's own negative_controls(), judged with every convention (tests/test_negative_controls.py judges
    them against the stated one)."""
    problem = discover.get_problem(problem_id)
    spec = problem.dtype("float8_e4m3")
    inputs = _inputs(problem_id, {"M": 67, "N": 67, "K": 67}, 1234)
    expected = expected_for(problem, inputs, spec)
    for name, control in problem.module().negative_controls().items():
        assert conventions.value_reasons(control(*inputs), expected, spec), name


# --- the contract, the cost and the default path


def test_other_conventions_are_built_only_when_the_stated_one_fails():
    """An output that passes under the stated convention costs the judge nothing more; a wrong one is tried
    against each other convention once."""
    problem = discover.get_problem(ROWWISE)
    spec = problem.dtype("float8_e4m3")
    inputs = _inputs(ROWWISE, {"M": 20, "N": 30, "K": 140}, 3)
    expected = expected_for(problem, inputs, spec)
    built = []

    def counting(name, make):
        return name, lambda: (built.append(name), make())[1]

    expected.others = tuple(counting(name, make) for name, make in expected.others)
    assert conventions.value_reasons(expected.torch_out, expected, spec) == [] and built == []
    assert conventions.value_reasons(torch.zeros_like(expected.torch_out), expected, spec)
    assert built == list(problem.module().CONVENTIONS[1:])


def test_problems_without_conventions_take_the_default_path():
    """One plain Expected and check.value_reasons unchanged, for a problem that declares no CONVENTIONS."""
    problem = discover.get_problem("gemm")
    spec = problem.dtype("bfloat16")
    inputs = make_inputs(problem, {"M": 33, "N": 17, "K": 65}, spec, 5, "cpu")
    expected = expected_for(problem, inputs, spec)
    assert type(expected) is check.Expected
    wrong = expected.torch_out.clone()
    wrong[3, 4] += 1.0
    assert conventions.value_reasons(wrong, expected, spec) == check.value_reasons(wrong, expected, spec) != []
    assert conventions.value_reasons(expected.torch_out, expected, spec) == []


def test_every_problem_declares_conventions_by_the_contract():
    """A declaration is checked (a malformed one is the problem author's error); the fp8 problems declare theirs,
    the stated rule first."""
    for problem in discover.all_problems():
        conventions.declared(problem.module())
    for problem_id in (ROWWISE, BLOCKWISE):
        assert conventions.declared(discover.get_problem(problem_id).module())[0] == "divide"


def _module(name, **attrs):
    import types
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


@pytest.mark.parametrize("attrs,message", [
    ({"CONVENTIONS": "divide"}, "non-empty tuple"),
    ({"CONVENTIONS": ("divide", "divide")}, "distinct"),
    ({"CONVENTIONS": ()}, "non-empty"),
    ({"CONVENTIONS": ("divide", "reciprocal"), "reference": lambda x: x}, r"reference\(\) must take a `convention`"),
])
def test_malformed_conventions_blame_the_problem(attrs, message):
    with pytest.raises(ProblemError, match=message):
        conventions.declared(_module("bad_problem", **attrs))


# --- w8a8_gemm: no quantization inside the kernel, so no convention rule; its dequantization orders all pass


def test_w8a8_dequantization_orders_pass():
    """w8a8's inputs arrive quantized (int8 with fp32 scales): the kernel's only choice is the order of the fp32
    dequantization, which moves the exact value by a few fp32 ulps and so changes at most a bf16 rounding at a
    near-midpoint, inside its budget (problems/w8a8_gemm/problem.yaml). That is rare (about 1 element in 10**5):
    the case below was picked (seed 31 of 0..39 at this shape) because each order differs there from torch's own
    answer in one element, so the test does not only compare identical outputs."""
    problem = discover.get_problem("w8a8_gemm")
    spec = problem.dtype("int8")
    assert conventions.declared(problem.module()) == ()
    orders = {
        "acc_times_product_of_scales": lambda acc, sx, sw: acc * (sx[:, None] * sw[None, :]),
        "weight_scale_first": lambda acc, sx, sw: (acc * sw[None, :]) * sx[:, None],
        "float64_then_round": lambda acc, sx, sw: acc.double() * sx.double()[:, None] * sw.double()[None, :],
    }
    inputs = make_inputs(problem, {"M": 128, "N": 128, "K": 32}, spec, 31, "cpu")
    x, sx, w, sw = inputs
    acc = (x.double() @ w.double().t()).float()              # exact int32 values, exactly in fp32 below 2**24
    expected = expected_for(problem, inputs, spec)
    differs = 0
    for name, order in orders.items():
        out = order(acc, sx, sw).to(torch.bfloat16)
        assert conventions.value_reasons(out, expected, spec) == [], name
        differs += int((out != expected.torch_out).sum())
    assert differs > 0
