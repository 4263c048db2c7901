"""A candidate that writes into the watched source tree: unconfined (`--sandbox off`, or a kernel without Landlock)
the write lands and the tree hash rejects it with `tampering`; confined, the OS refuses the write (the worker may
write only beneath its scratch dir), so nothing is planted and the candidate's own error is its verdict. Marked
serial: while it runs unconfined, any other judgement would see the planted file too (scripts/test.sh runs serial
tests alone)."""
import pytest

from gauntlet import discover
from gauntlet.judge import sandbox
from gauntlet.judge.evaluate import Options, evaluate
from tests.test_bad_solutions import BAD

MARKER = discover.problems_dir() / "gemm" / "_planted_by_candidate.py"


def _judge(mode: str):
    return evaluate(discover.get_problem("gemm"), discover.get_solution("gemm", str(BAD / "writes_into_source_tree.py")),
                    Options(device="cpu", dtypes=("float32",), examples=2, sandbox=mode))


@pytest.mark.serial
def test_write_into_source_tree_is_tampering_when_unconfined():
    try:
        record = _judge("off")
        assert record.verdict == "fail"
        tampering = [r for r in record.reasons if r["code"] == "tampering"]
        assert tampering and "created problems/gemm/_planted_by_candidate.py" in tampering[0]["detail"]
    finally:
        MARKER.unlink(missing_ok=True)


@pytest.mark.serial
@pytest.mark.skipif(bool(sandbox.missing()), reason=f"this kernel cannot confine: {sandbox.missing()}")
def test_write_into_source_tree_is_refused_when_confined():
    try:
        record = _judge("require")
        assert not MARKER.exists(), "the confined worker wrote into the source tree"
        assert record.verdict != "pass"
        assert record.reasons and "Permission" in " ".join(r["detail"] for r in record.reasons), record.reasons
        assert not [r for r in record.reasons if r["code"] == "tampering"], record.reasons
    finally:
        MARKER.unlink(missing_ok=True)
