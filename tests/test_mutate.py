"""`gauntlet mutate`: the operators plant the bugs they say on a small kernel, never a no-op, the choice of mutants
is reproducible, outcomes are classified right, and one tiny end-to-end run on a shipped Triton solution judges
its mutants (a caught one, a stillborn one) and reports them as one JSON object."""
import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from gauntlet import discover
from gauntlet.judge.values import failures
from gauntlet.mutate import mutants, mutate
from tests import needs

ROOT = Path(__file__).resolve().parents[1]

KERNEL = textwrap.dedent('''\
    import triton
    import triton.language as tl

    BACKEND = "triton"


    @triton.jit
    def _k(a_ptr, sa_ptr, sb_ptr, c_ptr, M, K, stride_am, stride_ak, qk_scale, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)    # a comment that must survive
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK)):
            x = tl.load(a_ptr + offs * stride_am + k * stride_ak, mask=offs < M, other=0.0)
            acc += x
        n = (K + BLOCK - 1) // BLOCK
        sa = tl.load(sa_ptr + offs)
        sb = tl.load(sb_ptr + offs)
        y = acc * sa * sb * qk_scale
        tl.store(c_ptr + offs, y / sa, mask=offs >= 0)


    def solve(a):
        return a
    ''')


def _changed_lines(m: mutants.Mutant) -> list[tuple[str, str]]:
    """(old line, new line) pairs that differ between the original and the mutant."""
    old, new = KERNEL.splitlines(), m.source.splitlines()
    assert len(old) == len(new), m.description       # every operator edits within lines
    return [(a.strip(), b.strip()) for a, b in zip(old, new) if a != b]


def _find(ms, operator, new_text):
    hits = [m for m in ms if m.operator == operator and any(new_text in b for _, b in _changed_lines(m))]
    assert hits, f"no {operator} mutant gives {new_text!r}; got " + "; ".join(
        f"{m.operator}: {_changed_lines(m)}" for m in ms if m.operator == operator)
    return hits[0]


@pytest.mark.parametrize(("operator", "new_text"), [
    ("strict_compare", "mask=offs <= M, other=0.0"),
    ("strict_compare", "mask=offs > 0)"),
    ("bound_off_by_one", "mask=offs < M - 1, other=0.0"),
    ("bound_off_by_one", "mask=offs >= 1)"),
    ("swap_strides", "offs * stride_ak + k * stride_am"),
    ("drop_tail", "range(0, K // BLOCK)"),
    ("drop_tail", "n = K // BLOCK"),
    ("acc_dtype", "dtype=tl.float16)"),
    ("acc_dtype", "dtype=tl.bfloat16)"),
    ("scale_dropped", "y = acc * sb * qk_scale"),
    ("scale_dropped", "y = acc * sa * sb"),
    ("scale_dropped", "tl.store(c_ptr + offs, y, mask"),
    ("scale_twice", "y = acc * (sa * sa) * sb * qk_scale"),
    ("scale_twice", "y / (sa * sa)"),
    ("scale_swap", "y = acc * sb * sa * qk_scale"),
    ("scale_swap", "sa = tl.load(sb_ptr + offs)"),
    ("pid_shift", "pid = (tl.program_id(0) + 1)"),
    ("offset_shift", "(tl.arange(0, BLOCK) + 1)"),
    ("drop_other", "mask=offs < M)"),
])
def test_operator_plants_the_bug_it_names(operator, new_text):
    ms = mutants.generate(KERNEL)
    m = _find(ms, operator, new_text)
    assert len(_changed_lines(m)) == 1                          # one line changed, nothing reformatted
    assert "# a comment that must survive" in m.source
    assert m.function == "_k" and KERNEL.splitlines()[m.line - 1] != m.source.splitlines()[m.line - 1]


def test_only_kernels_are_mutated_and_the_accumulator_rule_holds():
    ms = mutants.generate(KERNEL)
    assert all("def solve(a):\n    return a" in m.source for m in ms)
    # `acc` is updated in the loop: an accumulator; nothing else in the kernel is a tl.zeros/tl.full.
    assert {m.description.split(":")[0] for m in ms if m.operator == "acc_dtype"} == {
        "`tl.zeros((BLOCK,), dtype=tl.float32)`"}
    assert not [m for m in ms if m.operator == "bound_off_by_one" and "0.0" in m.description]


def test_fp16_accumulator_also_sets_the_dots_out_dtype():
    """Triton refuses an fp16 accumulator fed to a dot that produces fp32; the bug an author writes changes both."""
    source = textwrap.dedent('''\
        import triton
        import triton.language as tl

        @triton.jit
        def _k(a, b, c, BLOCK: tl.constexpr):
            acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
            for _ in range(4):
                acc = tl.dot(a, b, acc, input_precision="ieee")
            tl.store(c, acc)
        ''')
    ms = [m for m in mutants.generate(source) if m.operator == "acc_dtype"]
    fp16 = next(m for m in ms if "float16" in m.description and "bfloat16" not in m.description)
    assert 'acc = tl.dot(a, b, acc, input_precision="ieee", out_dtype=tl.float16)' in fp16.source
    assert "dtype=tl.float16)" in fp16.source
    bf16 = next(m for m in ms if "bfloat16" in m.description)
    assert "out_dtype" not in bf16.source             # out_dtype=bfloat16 does not exist in Triton


SHIPPED_TRITON = [s.path for p in discover.problem_ids() for s in discover.solutions_for(p) if s.backend == "triton"]


@pytest.mark.parametrize("path", SHIPPED_TRITON, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_mutant_is_the_original_or_a_repeat(path):
    source = path.read_text()
    original = ast.dump(ast.parse(source))
    ms = mutants.generate(source)
    assert ms, f"{path}: no mutant at all"
    dumps = [ast.dump(ast.parse(m.source)) for m in ms]     # every mutant parses
    assert original not in dumps
    assert len(set(dumps)) == len(dumps)


def test_selection_is_reproducible_and_keeps_every_operator():
    ms = mutants.generate((ROOT / "solutions/fp8_gemm_rowwise/triton_rowwise.py").read_text())
    present = {m.operator for m in ms}
    first = mutants.select(ms, len(present), seed=7)
    assert [m.source for m in first] == [m.source for m in mutants.select(ms, len(present), seed=7)]
    assert {m.operator for m in first} == present                     # stratified: one of each kind
    assert [m.line for m in first] == sorted(m.line for m in first)   # in source order
    others = [mutants.select(ms, len(present), seed=s) for s in range(5)]
    assert len({tuple(m.source for m in o) for o in others}) > 1      # the seed matters
    assert mutants.select(ms, 10_000, seed=0) == ms


def test_nothing_to_mutate_is_the_users_error(tmp_path):
    with pytest.raises(mutants.NotMutable, match="no @triton.jit kernel"):
        mutants.generate("BACKEND = 'triton'\ndef solve(a):\n    return a\n")
    with pytest.raises(mutants.NotMutable, match="does not parse"):
        mutants.generate("def (:\n")
    with pytest.raises(mutants.NotMutable, match="unknown mutation operator"):
        mutants.generate(KERNEL, ("swap_stride",))
    torch_file = tmp_path / "plain.py"
    torch_file.write_text("BACKEND = 'torch'\ndef solve(a, b):\n    return a @ b\n")
    with pytest.raises(discover.UsageError, match="Triton solutions"):
        mutate.plan(discover.read_solution(torch_file, "gemm"), mutate.Settings())


_FRONT_END_CRASH = '''Traceback (most recent call last):
  File "/x/site-packages/triton/runtime/interpreter.py", line 1357, in __call__
    self.fn(**args)
  File "/tmp/m/triton_int8.py", line 72, in _int8_gemm_kernel
    acc = tl.dot(a, b, acc, out_dtype=tl.int32)
  File "/x/site-packages/triton/language/semantic.py", line 1558, in dot
    assert acc.type.shape == ret_ty.shape and acc.type.element_ty == out_dtype
AssertionError

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/harness/child/worker.py", line 112, in handle
  File "/x/site-packages/triton/runtime/interpreter.py", line 1361, in __call__
triton.runtime.errors.InterpreterError: AssertionError()
'''
_RUNTIME_CRASH = _FRONT_END_CRASH.replace(
    'File "/x/site-packages/triton/language/semantic.py", line 1558, in dot',
    'File "/x/site-packages/triton/runtime/interpreter.py", line 444, in create_masked_load')


@pytest.mark.parametrize(("verdict", "reasons", "outcome"), [
    ("pass", [], "escaped"),
    ("fail", [{"code": "mismatch", "detail": "[bfloat16 M=3] 2 of 9 elements"}], "caught"),
    ("error", [{"code": "import_error", "detail": "SyntaxError"}], "stillborn"),
    ("error", [{"code": "crash", "detail": _FRONT_END_CRASH}], "stillborn"),
    ("error", [{"code": "crash", "detail": "triton.compiler.errors.CompilationError: at 12:4"}], "stillborn"),
    ("error", [{"code": "crash", "detail": _RUNTIME_CRASH}], "caught"),      # a fault while running is a catch
    ("error", [{"code": "crash", "detail": "the candidate's process died (signal 11)"}], "caught"),
    ("timeout", [{"code": "timeout", "detail": "no reply in 60 s"}], "caught"),
])
def test_classify(verdict, reasons, outcome):
    assert mutate.classify(verdict, reasons) == outcome


class _Record:
    def __init__(self, verdict, reasons=()):
        self.verdict, self.reasons = verdict, list(reasons)


_REFUSED = _Record("error", [{"code": "crash", "detail": _FRONT_END_CRASH}])
_WRONG = _Record("fail", [{"code": "mismatch", "detail": "[float16 M=3] 1 of 9 elements"}])
_PASS = _Record("pass")


@pytest.mark.parametrize(("per_dtype", "outcome", "judged"), [
    ({"bfloat16": _WRONG, "float16": _PASS}, "caught", ["bfloat16"]),          # the first catch ends it
    ({"bfloat16": _REFUSED, "float16": _WRONG}, "caught", ["bfloat16", "float16"]),
    ({"bfloat16": _REFUSED, "float16": _PASS}, "escaped", ["bfloat16", "float16"]),   # it ran somewhere and passed
    ({"bfloat16": _PASS, "float16": _REFUSED}, "escaped", ["bfloat16", "float16"]),
    ({"bfloat16": _REFUSED, "float16": _REFUSED}, "stillborn", ["bfloat16", "float16"]),
    ({"bfloat16": _PASS, "float16": _PASS}, "escaped", ["bfloat16", "float16"]),
])
def test_a_mutant_is_judged_dtype_by_dtype(monkeypatch, per_dtype, outcome, judged):
    seen = []

    def fake_evaluate(problem, solution, opts):
        seen.append(opts.dtypes[0])
        assert opts.timing is False and opts.shrink is False
        return per_dtype[opts.dtypes[0]]

    monkeypatch.setattr(mutate, "evaluate", fake_evaluate)
    problem = discover.get_problem("grouped_gemm_moe")
    solution = discover.get_solution("grouped_gemm_moe", "triton_grouped")
    result = mutate.judge(problem, solution, mutate.Settings(dtypes=("bfloat16", "float16")))
    assert (result["outcome"], seen) == (outcome, judged)
    assert result["stillborn_in"] == [d for d in judged if per_dtype[d] is _REFUSED]


def test_failing_cases_of_mutants_stay_out_of_the_replay_store(tmp_path, monkeypatch):
    """The cases go where the judgement's Options.failures_dir says (mutate: a temporary folder), never into the
    default store, and every dtype's judgement of a mutant is told so."""
    monkeypatch.setattr(failures, "DIR", tmp_path / "store")
    failures.save("gemm", tmp_path / "m.py", "float16", "cpu", {"M": 1}, 3, where=tmp_path / "f")
    assert failures.load("gemm", tmp_path / "m.py", "float16", "cpu", where=tmp_path / "f") == [({"M": 1}, 3)]
    assert list((tmp_path / "f").rglob("*.json")) and not (tmp_path / "store").exists()
    assert failures.load("gemm", tmp_path / "m.py", "float16", "cpu") == []
    seen = []

    def fake_evaluate(problem, solution, opts):
        seen.append(opts.failures_dir)
        return SimpleNamespace(verdict="pass", reasons=[])

    monkeypatch.setattr(mutate, "evaluate", fake_evaluate)
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", "triton_tiled")
    mutate.judge(problem, solution, mutate.Settings(dtypes=("float16", "float32"), failures_dir=str(tmp_path / "f")))
    assert seen == [str(tmp_path / "f")] * 2


@needs.triton_cpu
def test_end_to_end_on_a_shipped_solution():
    """int8 GEMM (one exact dtype, the cheapest to judge): a dropped tail and an accumulator that Triton refuses
    (int32 -> float32 beside `out_dtype=tl.int32`). The control passes; the tail bug is caught at some dtype."""
    cmd = [sys.executable, "-m", "gauntlet", "mutate", "int8_gemm", "triton_int8", "--max", "3", "--examples", "1",
           "--operator", "drop_tail", "--operator", "acc_dtype", "--json"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, out.stdout + out.stderr
    report = json.loads(lines[0])
    assert report["schema"] == mutate.SCHEMA and report["control"]["verdict"] == "pass", report.get("control")
    assert report["judged"] == 3 and report["produced"] == 5
    ops = sorted(m["operator"] for m in report["mutants"])
    assert ops == ["acc_dtype", "drop_tail", "drop_tail"]
    for m in report["mutants"]:
        assert m["diff"].startswith("--- a/triton_int8.py") and m["line"] > 0
        if m["operator"] == "drop_tail":
            assert m["outcome"] == "caught", m
        if "-> `float32`" in m["description"]:
            assert m["outcome"] == "stillborn", m
    assert report["caught"] + report["escaped"] + report["stillborn"] == 3
    assert report["score"] == report["caught"] / (report["caught"] + report["escaped"])
    assert (out.returncode == 0) == (report["escaped"] == 0)
    assert "[1/3] line" in out.stderr                             # progress goes to stderr
