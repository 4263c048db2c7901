"""One allowlist meaning on both devices (harness/judge/process/kernels.py GLUE_FAMILIES): every op family allowed on
one device is allowed on the other, routing glue (diff, sort/argsort, bincount, searchsorted, topk, cumsum, histc,
unique, ...) included, and a matrix product, convolution or attention stays forbidden on both. The CPU side is measured
here (the aten ops torch's profiler records for real calls); the GPU side from kernel names."""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from gauntlet import discover
from gauntlet.judge.evaluate import Options, evaluate
from gauntlet.judge.process import kernels
from tests import needs
from tests.test_bad_solutions import BAD

GOOD = BAD.parent / "good"
OWN = "_grouped_gemm_kernel"

_x = torch.randint(0, 8, (64,), dtype=torch.int32)
_f = torch.randn(64, 16)
# family -> calls that make it on the CPU (what a kernel's wrapper writes around its launch)
CPU_CALLS = {
    "allocation and views": [lambda: _f.t().reshape(16, 64)[:, 1:].unsqueeze(0).expand(2, -1, -1),
                             lambda: torch.empty(3, 4).view(12).narrow(0, 1, 5)],
    "copies and casts": [lambda: _f.t().contiguous(), lambda: _x.to(torch.int64), lambda: int(_x[3])],
    "fills and factories": [lambda: torch.zeros(4, dtype=torch.int32), lambda: torch.arange(5),
                            lambda: torch.full((3,), 2.0), lambda: torch.triu(_f[:16])],
    "elementwise math": [lambda: torch.diff(_x), lambda: torch.diff(_x, prepend=_x.new_zeros(1)),
                         lambda: (_x + 15) // 16, lambda: torch.where(_x > 3, _x, 0)],
    "reductions": [lambda: _x.sum(), lambda: _f.amax(1), lambda: _f.max(1), lambda: torch.count_nonzero(_x)],
    "indexing, gather, scatter, concatenation": [
        lambda: _f[_x.long()], lambda: torch.nonzero(_x), lambda: torch.argwhere(_x),
        lambda: torch.repeat_interleave(torch.arange(4), torch.tensor([1, 2, 3, 4])),
        lambda: torch.zeros(8).index_add(0, _x.long(), torch.ones(64)),
        lambda: torch.zeros(8).scatter_reduce(0, _x.long(), torch.ones(64), "sum"),
        lambda: torch.nn.functional.one_hot(_x.long(), 8), lambda: torch.cat([_x, _x])],
    "scans": [lambda: torch.cumsum(_x, 0), lambda: torch.cumsum(_x, 0, dtype=torch.int32),
              lambda: torch.cummax(_f, 0)],
    "sorting and selection": [lambda: torch.sort(_x), lambda: torch.argsort(_x, stable=True),
                              lambda: torch.topk(_f, 2, dim=1), lambda: torch.kthvalue(_f, 2, 1),
                              lambda: torch.unique(_x, return_counts=True, return_inverse=True),
                              lambda: torch.unique_consecutive(_x)],
    "searching and counting": [lambda: torch.bincount(_x, minlength=8),
                               lambda: torch.searchsorted(torch.arange(8), _x),
                               lambda: torch.bucketize(_x, torch.arange(8)), lambda: torch.histc(_f, 8),
                               lambda: torch.isin(_x, torch.tensor([1, 2]))],
}
FORBIDDEN_CPU = {
    "matmul": lambda: _f @ _f.t(), "bmm": lambda: torch.bmm(_f[None], _f.t()[None]),
    "einsum": lambda: torch.einsum("ik,jk->ij", _f, _f), "linear": lambda: torch.nn.functional.linear(_f, _f),
    "conv": lambda: torch.nn.functional.conv1d(_f.t()[None], torch.randn(4, 16, 1)),
    "attention": lambda: torch.nn.functional.scaled_dot_product_attention(_f[None, None], _f[None, None],
                                                                          _f[None, None]),
    "softmax": lambda: torch.softmax(_f, 1), "tensordot": lambda: torch.tensordot(_f, _f.t(), 1),
}
FORBIDDEN_GPU = [
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel",
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x3_tn_align4>(cutlass_80_tensorop_s1688gemm)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float, float, float>",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >(Flash_fwd_params)",
    "void at::native::im2col_kernel<float>(long, float const*, long, long)",
    "void cudnn::cnn::conv2d_grouped_direct_kernel<float>()",
    "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
    "curandStatePhilox4_32_10*>()",
]


def _cpu_ops(fn) -> list[str]:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sorted({e.name for e in prof.events() if e.name.startswith("aten::")})


def _gpu_call(*names):
    return {"kernels": [[OWN, 100.0]] + [[n, 1.0] for n in names], "ops": [], "launches": [], "marked": True,
            "compiled": [OWN]}


def test_the_table_gives_each_family_a_meaning_on_both_devices():
    """Every family names its aten ops and, where it launches kernels, a GPU pattern with kernel names it takes;
    ALLOWED_OPS and TORCH_GLUE are exactly the table's, so no op family is on one device's list only."""
    assert set(CPU_CALLS) == set(kernels.GLUE_FAMILIES)
    assert kernels.ALLOWED_OPS == {op for f in kernels.GLUE_FAMILIES.values() for op in f.ops.split()}
    for name, family in kernels.GLUE_FAMILIES.items():
        assert family.ops.split(), name
        if family.gpu is None:
            assert not family.kernels_seen, name
            continue
        assert family.kernels_seen, f"{name}: a GPU pattern without a kernel name it takes"
        for kernel in family.kernels_seen:
            assert kernels.call_problems(_gpu_call(kernel), "cuda", frozenset({OWN}), timed=False) == [], \
                f"{name}: {kernel} refused on the GPU"


@pytest.mark.parametrize("family", sorted(CPU_CALLS))
def test_every_family_is_allowed_on_the_cpu(family):
    for fn in CPU_CALLS[family]:
        ops = _cpu_ops(fn)
        assert kernels.call_problems({"ops": ops, "launches": ["k"]}, "cpu", frozenset(), timed=False) == [], ops


@pytest.mark.parametrize("name", sorted(FORBIDDEN_CPU))
def test_products_convolutions_and_attention_stay_forbidden_on_both_devices(name):
    ops = _cpu_ops(FORBIDDEN_CPU[name])
    assert kernels.call_problems({"ops": ops, "launches": ["k"]}, "cpu", frozenset(), timed=False), ops
    for kernel in FORBIDDEN_GPU:
        assert kernels.call_problems(_gpu_call(kernel), "cuda", frozenset({OWN}), timed=False), kernel


@needs.triton_cpu
def test_an_honest_moe_kernel_with_routing_glue_passes_on_the_cpu():
    """tests/good/grouped_moe_routing_glue.py: searchsorted, bincount, diff and argsort around the shipped grouped
    kernel's schedule. The CPU allowlist used to refuse all four (forbidden_op); one case, three calls."""
    problem = discover.get_problem("grouped_gemm_moe")
    solution = discover.get_solution("grouped_gemm_moe", str(GOOD / "grouped_moe_routing_glue.py"))
    record = evaluate(problem, solution, Options(device="cpu", dtypes=("bfloat16",), seed=3,
                                                 case="M=77,N=40,K=33,E=9,routing=zipf,seed=5"))
    assert record.verdict == "pass", record.reasons
