"""A candidate that writes into the watched source tree is rejected with `tampering`. Marked serial: while it
runs, any other judgement would see the planted file too (scripts/test.sh runs serial tests alone)."""
import pytest

from harness import discover
from harness.judge.evaluate import Options, evaluate
from tests.test_bad_solutions import BAD


@pytest.mark.serial
def test_write_into_source_tree_is_tampering():
    marker = discover.problems_dir() / "gemm" / "_planted_by_candidate.py"
    try:
        record = evaluate(discover.get_problem("gemm"), discover.get_solution("gemm", str(BAD / "writes_into_source_tree.py")),
                          Options(device="cpu", dtypes=("float32",), examples=2))
        assert record.verdict == "fail"
        tampering = [r for r in record.reasons if r["code"] == "tampering"]
        assert tampering and "created problems/gemm/_planted_by_candidate.py" in tampering[0]["detail"]
    finally:
        marker.unlink(missing_ok=True)
