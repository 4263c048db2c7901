"""The net where adversarial candidates slipped through (issue 16): draws large and misaligned at once, input
magnitudes across the exponent range, exact-arithmetic cases for float32, and no pass for a judgement that judged
nothing. In-process and on the CPU, a few seconds each; the fixtures themselves are judged by
tests/test_corpus_extra.py and tests/test_bad_solutions.py."""
import collections
import json
import os
import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from gauntlet import discover
from tests import needs
from gauntlet.inputs import make_inputs, matmul_precision
from gauntlet.judge.values import check, fuzz
from gauntlet.judge.values.oracle import expected_for
from tests.test_bad_solutions import BAD

GEMM = discover.get_problem("gemm")
SHAPES = [(37, 45, 300), (1, 1, 1099), (383, 1, 1), (35, 35, 1099), (383, 383, 9), (128, 96, 513)]


def _split3(a, b):
    def split(x):
        hi = x.bfloat16()
        return hi.float(), (x - hi.float()).bfloat16().float()
    (ah, al), (bh, bl) = split(a), split(b)
    return ah @ bh + (ah @ bl + al @ bh)


def _scaled_fp16(a, b):
    def f(x):
        s = torch.floor(torch.log2(x.abs().amax().clamp_min(1e-38))) - 14
        return (x * torch.exp2(-s)).half().float(), s
    (a16, sa), (b16, sb) = f(a), f(b)
    return (a16 @ b16) * torch.exp2(sa + sb)


def _splitk(a, b, parts=4):
    step = max(1, -(-a.shape[1] // parts))
    outs = [a[:, k:k + step] @ b[k:k + step] for k in range(0, a.shape[1], step)]
    acc = outs[-1]
    for o in outs[-2::-1]:
        acc = acc + o
    return acc


def _tf32(x):
    i = x.view(torch.int32)
    return ((i + 0x0FFF + ((i >> 13) & 1)) & ~0x1FFF).view(torch.float32)


HONEST = {"float32": {"torch": lambda a, b: a @ b, "fp64_then_round": lambda a, b: (a.double() @ b.double()).float(),
                      "split_k": _splitk, "reversed_k": lambda a, b: a.flip(1) @ b.flip(0)},
          "tf32": {"torch": lambda a, b: a @ b, "tf32_operands": lambda a, b: _tf32(a) @ _tf32(b)}}
BAD_FNS = {"float32": {"bf16x3": _split3, "fp16_operands": lambda a, b: a.half().float() @ b.half().float()},
           "tf32": {"fp16_operands": lambda a, b: a.half().float() @ b.half().float(), "scaled_fp16": _scaled_fp16}}


def _rejections(dtype: str, seeds: int = 8):
    """(kind, name) -> Counter of (mode, rejected) over SHAPES x seeds calls of gemm."""
    spec = GEMM.dtype(dtype)
    out = collections.defaultdict(collections.Counter)
    for M, N, K in SHAPES:
        for seed in range(seeds):
            inputs = make_inputs(GEMM, {"M": M, "N": N, "K": K}, spec, seed * 7919 + M, "cpu")
            expected = expected_for(GEMM, inputs, spec)
            assert expected.exact_case == (inputs.mode == "exact")
            for kind, fns in (("honest", HONEST[dtype]), ("bad", BAD_FNS[dtype])):
                for name, fn in fns.items():
                    with matmul_precision(spec):
                        got = fn(*inputs)
                    out[(kind, name)][(inputs.mode, bool(check.value_reasons(got, expected, spec)))] += 1
    return out


def _rate(counter, modes):
    hit = sum(counter[(m, True)] for m in modes)
    return hit / max(1, hit + sum(counter[(m, False)] for m in modes))


def test_float32_admits_true_fp32_in_any_order_and_not_bf16x3():
    """Measured on 9 shapes x 24 seeds (gemm's CPU edges and a few others): honest orders 0 rejections in every
    mode; bf16x3 rejected in 37 of 41 exact cases (the 4 others: 1 x 1 outputs whose 4 products happened to split
    exactly) and 2 of 175 others; fp16 operands in every huge, tiny and spread case. Here a smaller sweep."""
    res = _rejections("float32")
    for (kind, name), c in res.items():
        if kind == "honest":
            assert _rate(c, {m for m, _ in c}) == 0, (name, c)
    assert _rate(res[("bad", "bf16x3")], {"exact"}) >= 0.75, res[("bad", "bf16x3")]
    assert _rate(res[("bad", "fp16_operands")], {"huge", "tiny", "spread"}) == 1.0


def test_tf32_with_fp16_operands_fails_outside_fp16s_range():
    """Measured on the same 9 x 24 sweep: fp16 operands rejected in 46/46 huge, 36/36 tiny, 84/84 spread calls
    (0/50 as made); scaled fp16 in 69/84 spread calls (0 elsewhere); TF32-rounded operands and torch never."""
    res = _rejections("tf32")
    for (kind, name), c in res.items():
        if kind == "honest":
            assert _rate(c, {m for m, _ in c}) == 0, (name, c)
    assert _rate(res[("bad", "fp16_operands")], {"huge", "tiny", "spread"}) == 1.0
    assert _rate(res[("bad", "scaled_fp16")], {"spread"}) >= 0.6


@pytest.mark.parametrize("problem_id", ["gemm", "bmm", "gemm_layouts"])
def test_exact_cases_are_exact_and_keep_the_layout(problem_id):
    problem = discover.get_problem(problem_id)
    spec = problem.dtype("float32")
    shape = {d: (b[0] if not isinstance(b, tuple) else min(b[1], 67)) for d, b in problem.fuzz["cpu"].dims.items()}
    if problem_id == "gemm_layouts":
        shape["layout"] = "TN"
    exact = scaled = 0
    for seed in range(40):
        inputs = make_inputs(problem, shape, spec, seed, "cpu")
        plain = problem.module().make_inputs(dict(shape), spec.torch_dtype(), seed, "cpu")
        assert [x.stride() for x in inputs] == [x.stride() for x in plain]      # a T view stays one
        expected = expected_for(problem, inputs, spec)
        exact += inputs.mode == "exact"
        scaled += inputs.mode in ("huge", "tiny", "spread")
        assert expected.exact_case == (inputs.mode == "exact"), seed
        assert check.value_reasons(expected.torch_out, expected, spec) == []
    assert exact >= 5 and scaled >= 10, (exact, scaled)


def _draws(problem_id, device, n):
    bounds = discover.get_problem(problem_id).fuzz[device]
    out = []

    @hypothesis_seed(0)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(shape=fuzz.shapes(bounds))
    def collect(shape):
        out.append(shape)
    collect()
    return out


def test_draws_and_edges_reach_large_misaligned_outputs():
    """Measured over 3000 draws of gemm's CPU domain: "M * N >= 8192 and N % 16 != 0" in 4.2% before, 9.9% now;
    and the wide edge case (383 x 383 x 9) in every judgement."""
    draws = _draws("gemm", "cpu", 600)
    share = sum(d["M"] * d["N"] >= 8192 and d["N"] % 16 != 0 for d in draws) / len(draws)
    assert share >= 0.06, share
    edges = fuzz.edge_cases(GEMM.fuzz["cpu"])
    assert {"M": 383, "N": 383, "K": 9} in edges and len(edges) <= fuzz.EDGE_CASES_MAX


def _cli(*args, env=None):
    out = subprocess.run([sys.executable, "-m", "gauntlet", "eval", "gemm", *args, "--device", "cpu", "--json"],
                         capture_output=True, text=True, timeout=300, env=env)
    return out.returncode, json.loads(out.stdout)


@pytest.mark.parametrize(("name", "extra"), [("declares_no_dtypes", []), ("declares_foreign_dtypes", []),
                                             ("asked_outside_its_dtypes", ["--dtype", "float32"])])
def test_a_judgement_of_nothing_is_never_a_pass(name, extra):
    code, doc = _cli(str(BAD / f"{name}.py"), *extra)
    assert code == 1 and doc["verdict"] == "fail", doc
    assert [r["code"] for r in doc["reasons"]] == ["nothing_judged"] and not doc["cases"]


def test_the_plugin_fails_a_solution_with_no_dtype_to_judge(tmp_path):
    """One failing item ([no dtype]) instead of one skip per dtype: all-skipped read as fine in CI."""
    folder = tmp_path / "solutions" / "gemm"
    folder.mkdir(parents=True)
    (folder / "computes_nothing.py").write_text((BAD / "declares_no_dtypes.py").read_text())
    env = needs.plugin_env(dict(os.environ, GAUNTLET_SOLUTIONS=str(tmp_path / "solutions")))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          str(folder / "computes_nothing.py")], capture_output=True, text=True, timeout=300,
                         env=env, cwd=BAD.parent.parent)
    assert out.returncode == 1, out.stdout[-2000:]
    assert "gemm/computes_nothing[no dtype]" in out.stdout and "nothing_judged" in out.stdout, out.stdout[-2000:]
    assert "1 failed" in out.stdout and "skipped" not in out.stdout, out.stdout[-2000:]
    # the reasons are printed as the item fails, ahead of pytest's summary (which a job stopped at its limit loses)
    early = out.stdout.find("gauntlet: ")
    assert -1 < early < out.stdout.find("= FAILURES =") and "nothing_judged" in out.stdout[early:early + 2000]
