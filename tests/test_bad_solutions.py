"""Known-bad solutions (tests/bad/) must be rejected with their specific reason code; the run must go on after
each, whatever the candidate did to its own process. Shipped solutions must pass (the plugin covers those)."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gauntlet import discover
from gauntlet.judge.evaluate import Options, evaluate

BAD = Path(__file__).parent / "bad"

# file -> (reason code, dtypes to judge). One or two dtypes keep CI fast; the cheat does not depend on dtype.
EXPECTED = {
    "one_wrong_element": ("mismatch", ("float32",)),
    "zeros": ("mismatch", ("bfloat16",)),
    "lower_precision_fp32": ("mismatch", ("float32",)),
    "stale_cache_by_shape": ("stale_output", ("float16",)),
    "inplace_input_write": ("input_mutated", ("float32",)),
    "triton_calls_torch_matmul": ("forbidden_op", ("float32",)),
    "triton_tail_tile_bug": ("mismatch", ("float16",)),
    "wrong_dtype": ("wrong_dtype", ("bfloat16",)),
    "transposed_output": ("wrong_shape", ("float32",)),
    "tensor_subclass": ("not_a_tensor", ("float32",)),
    "output_aliases_input": ("output_aliases_input", ("float32",)),
    "raises": ("crash", ("float32",)),
    "segfault": ("crash", ("float32",)),
    "exits_early": ("crash", ("float32",)),
    "hangs": ("timeout", ("float32",)),
    "patches_allclose": ("tampering", ("float32",)),
    "background_thread": ("background_work", ("float32",)),
    "syntax_error": ("import_error", ("float32",)),
    # Judged on nothing: DTYPES shares no dtype with the problem, or with the dtype asked for (never a pass).
    "declares_no_dtypes": ("nothing_judged", ("float32",)),
    "declares_foreign_dtypes": ("nothing_judged", ("float32",)),
    "asked_outside_its_dtypes": ("nothing_judged", ("float32",)),
}


def judge(name: str, dtypes, examples=6, timeout=60.0, seed=None):
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", str(BAD / f"{name}.py"))
    opts = Options(device="cpu", dtypes=dtypes, examples=examples, seed=seed, case_timeout_s=timeout)
    return evaluate(problem, solution, opts)


SERIAL = {"writes_into_source_tree"}     # tests/test_tree_tamper.py, run alone
from tests.test_sandbox import FIXTURES as SANDBOX      # noqa: E402 - resource bounds, judged with their own limits
from tests.test_outside_proc import FIXTURES as OUTSIDE  # noqa: E402 - judged where the runner's bounds are known
from tests import needs


def _declares_expected(path) -> bool:
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "EXPECTED" for n in tree.body)


def test_every_fixture_is_listed():
    """Each fixture is claimed by this table, by the serial test, or by its own EXPECTED line (test_corpus_extra)."""
    declared = {p.stem for p in BAD.glob("*.py") if _declares_expected(p)}
    assert sorted(p.stem for p in BAD.glob("*.py")) == sorted(set(EXPECTED) | SERIAL | SANDBOX | OUTSIDE | declared)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_solution_is_rejected_with_its_code(name):
    code, dtypes = EXPECTED[name]
    needs.skip_unless_triton_cpu_for(BAD / f"{name}.py")
    record = judge(name, dtypes, timeout=8.0 if name == "hangs" else 120.0)
    codes = [r["code"] for r in record.reasons]
    assert record.verdict != "pass"
    assert code in codes, f"{name}: expected {code}, got {record.reasons}"


@needs.triton_cpu
def test_failure_shrinks_and_prints_a_replay_command_that_reproduces_it():
    record = judge("triton_tail_tile_bug", ("float16",), examples=10, seed=7)
    reason = next(r for r in record.reasons if r["code"] == "mismatch")
    assert reason["repro"].startswith("gauntlet eval gemm ")
    case = reason["repro"].split("--case ")[1].strip("'")
    replay = evaluate(discover.get_problem("gemm"), discover.get_solution("gemm", str(BAD / "triton_tail_tile_bug.py")),
                      Options(device="cpu", dtypes=("float16",), case=case))
    assert [r["code"] for r in replay.reasons] == ["mismatch"]


def test_a_wrong_output_of_one_element_is_a_mismatch_not_stale_by_chance():
    """A split-K kernel with a bf16 running sum, on a 1x1 gemm output: its wrong answer to a later call of the case
    fell within an earlier call's element-wise budget, and the record said stale_output (CI, this very seed). Outputs
    of under 16 elements are never called stale (gauntlet.judge.calls.Judge._is_stale): a mismatch, failing all
    the same; stale answers of larger outputs are still caught (test_cli_eval_json_reports_the_code_and_exit_1)."""
    replay = evaluate(discover.get_problem("gemm"),
                      discover.get_solution("gemm", str(BAD / "ksplit_bf16_accumulate_short_k.py")),
                      Options(device="cpu", dtypes=("bfloat16",), case="M=1,N=1,K=1099,seed=1521838055",
                              timing=False))
    assert replay.verdict == "fail" and [r["code"] for r in replay.reasons] == ["mismatch"]


def test_cli_eval_json_reports_the_code_and_exit_1():
    out = subprocess.run([sys.executable, "-m", "gauntlet", "eval", "gemm", str(BAD / "stale_cache_by_shape.py"),
                          "--device", "cpu", "--dtype", "float32", "--examples", "4", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)       # exactly one JSON object on stdout
    assert doc["schema"] == "gauntlet.eval/1" and doc["verdict"] == "fail"
    assert [r["code"] for r in doc["reasons"]] == ["stale_output"]
    assert doc["cases"]["float32"]["calls"] >= 2


def test_cli_eval_shipped_solution_exit_0():
    out = subprocess.run([sys.executable, "-m", "gauntlet", "eval", "gemm", "torch_matmul", "--device", "cpu",
                          "--examples", "3", "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["verdict"] == "pass"


def test_a_crash_costs_one_dtype_not_all():
    """The crash in float16 kills that process; float32, judged next in a fresh process, still passes."""
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", str(BAD / "segfaults_on_float16_only.py"))
    record = evaluate(problem, solution, Options(device="cpu", dtypes=("float16", "float32"), examples=3))
    assert [r["code"] for r in record.reasons] == ["crash"]
    assert record.cases["float16"]["status"] == "crash"
    assert record.cases["float32"]["status"] == "pass" and record.cases["float32"]["calls"] >= 3
    assert "float32" not in record.skipped


def test_each_dtype_says_where_its_correctness_time_went():
    """cases[dtype]["phases_s"]: the judge's inputs and oracle, the request, the reply's checks (seconds, summing to
    no more than the judgement's time) and the GiB of outputs that came back: a profile from an ordinary run."""
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", str(BAD.parent.parent / "solutions/gemm/torch_matmul.py"))
    record = evaluate(problem, solution, Options(device="cpu", dtypes=("float32",), examples=1, max_edges=2,
                                                 timing=False, seed=4))
    assert record.verdict == "pass", record.reasons
    phases = record.cases["float32"]["phases_s"]
    assert set(phases) == {"expect", "request", "check", "output_gib"}
    assert all(v >= 0 for v in phases.values()) and phases["request"] > 0 and phases["output_gib"] > 0
    assert phases["expect"] + phases["request"] + phases["check"] <= record.elapsed_s + 0.01
    # and the whole judgement's stages: the worker's start, the dtype's correctness (which holds its phases), the
    # workers' close and the rest, adding up to elapsed_s
    stages = record.stages_s
    assert set(stages) == {"start", "correctness", "close", "rest"} and set(stages["correctness"]) == {"float32"}
    assert stages["start"] > 0 and stages["correctness"]["float32"] >= sum(phases[k] for k in ("request", "check"))
    total = stages["start"] + stages["correctness"]["float32"] + stages["close"] + stages["rest"]
    assert abs(total - record.elapsed_s) < 0.05
