"""A failing case is kept and replayed first the next time the same file is judged, whatever the new seed."""
from pathlib import Path

from gauntlet import discover
from gauntlet.judge.evaluate import Options, evaluate
from gauntlet.judge.values import failures
from tests import needs

BAD = Path(__file__).parent / "bad" / "triton_tail_tile_bug.py"


def _judge(seed, examples):
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", str(BAD))
    return evaluate(problem, solution, Options(device="cpu", dtypes=("float16",), examples=examples, seed=seed))


@needs.triton_cpu
def test_failing_case_is_saved_and_replayed_first(tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "DIR", tmp_path / "failures")
    first = _judge(seed=7, examples=10)
    reason = next(r for r in first.reasons if r["code"] == "mismatch")
    case = reason["repro"].split("--case ")[1].strip("'")
    saved = failures.load("gemm", str(BAD), "float16", "cpu")
    assert len(saved) == 1 and "replayed" not in first.cases["float16"]
    again = _judge(seed=12345, examples=1)
    assert again.cases["float16"]["replayed"] == 1
    replayed = next(r for r in again.reasons if r["code"] == "mismatch")
    assert replayed["repro"].split("--case ")[1].strip("'") == case


@needs.triton_cpu
def test_cases_that_no_longer_fit_the_problem_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(failures, "DIR", tmp_path / "failures")
    failures.save("gemm", str(BAD), "float16", "cpu", {"M": 1, "N": 1, "X": 3}, 1)
    failures.save("gemm", str(BAD), "float16", "cpu", {"M": 1, "N": 1, "K": 10**9}, 1)
    record = _judge(seed=7, examples=2)
    assert "replayed" not in record.cases["float16"]
