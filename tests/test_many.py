"""`gauntlet eval-many` (gauntlet.executors.many): many candidates of one problem in one judge process, one JSON line
each, a summary line last; a file already judged (same fingerprint) is not judged again; a stop ends with the
summary and 130; what cannot be read is the user's error before anything is judged."""
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gauntlet.discover import UsageError
from tests import needs
from gauntlet.executors import many

ROOT = Path(__file__).resolve().parents[1]
GOOD = "import torch\nBACKEND = 'torch'\ndef solve(a, b):\n    return torch.matmul(a, b)\n"
ZEROS = ("import torch\nBACKEND = 'torch'\ndef solve(a, b):\n"
         "    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)\n")
NO_BACKEND = "def solve(a, b):\n    return a @ b\n"
STUCK = "import time, torch\nBACKEND = 'torch'\ndef solve(a, b):\n    time.sleep(600)\n"
FLAGS = ["--device", "cpu", "--dtype", "float32", "--examples", "1", "--seed", "1"]


def _cli(*argv, stdin=""):
    out = subprocess.run([sys.executable, "-m", "gauntlet", "eval-many", *argv], capture_output=True, text=True,
                         input=stdin, cwd=ROOT, timeout=600)
    return out.returncode, [json.loads(line) for line in out.stdout.splitlines()], out.stderr


def test_a_folder_and_standard_input_each_candidate_one_line_then_a_summary(tmp_path):
    folder = tmp_path / "cands"
    folder.mkdir()
    for name, text in (("good", GOOD), ("zeros", ZEROS), ("no_backend", NO_BACKEND)):
        (folder / f"{name}.py").write_text(text)
    inline = json.dumps({"id": "inline", "source": NO_BACKEND})
    out = tmp_path / "lines.jsonl"
    # good.py twice (the same file: judged once in a run), an inline source from standard input.
    code, lines, err = _cli("gemm", str(folder), "-", str(folder / "good.py"), *FLAGS, "--out", str(out),
                            stdin=inline + "\n")
    assert code == 0, err
    *records, last = lines
    assert [r["id"] for r in records] == ["good", "no_backend", "zeros", "inline", "good#2"]
    assert [r["verdict"] for r in records] == ["pass", "error", "fail", "error", "pass"]
    assert [r["reasons"][0]["code"] for r in records if r["reasons"]] == ["import_error", "mismatch", "import_error"]
    assert all(r["schema"] == many.SCHEMA and r["fingerprint"] for r in records)
    assert [r["resumed"] for r in records] == [False, False, False, False, True]
    assert last["summary"]["verdicts"] == {"pass": 2, "error": 2, "fail": 1}
    assert last["summary"]["judged"] == 4 and last["summary"]["resumed"] == 1 and last["summary"]["per_hour"] > 0
    stages = last["summary"]["stages_s"]                 # the 4 judged lines' stages_s, summed (not the resumed)
    judged = [r for r in records if not r["resumed"]]
    assert stages["start"] > 0 and abs(sum(stages.values()) - sum(r["elapsed_s"] for r in judged)) < 0.1
    assert len(out.read_text().splitlines()) == 6
    # A second run over the same output file judges nothing again.
    code, lines, err = _cli("gemm", str(folder), *FLAGS, "--out", str(out))
    assert code == 0, err
    assert [r["resumed"] for r in lines[:-1]] == [True, True, True]
    assert [r["verdict"] for r in lines[:-1]] == ["pass", "error", "fail"]
    assert lines[-1]["summary"]["judged"] == 0


def test_a_stop_ends_with_the_summary_line_and_130(tmp_path):
    (tmp_path / "a_good.py").write_text(GOOD)
    (tmp_path / "b_stuck.py").write_text(STUCK)
    proc = subprocess.Popen([sys.executable, "-m", "gauntlet", "eval-many", "gemm", str(tmp_path), *FLAGS,
                             "--timeout", "900"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True, preexec_fn=needs.ctrl_c_default)
    first = proc.stdout.readline()                  # a_good's line: b_stuck is in flight from now on
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert json.loads(first)["verdict"] == "pass"
    lines = [json.loads(line) for line in rest.splitlines()]
    assert len(lines) == 1 and lines[0]["summary"]["interrupted"] == "SIGINT", rest
    assert lines[0]["summary"]["judged"] == 1 and "Traceback" not in err


@pytest.mark.parametrize(("items", "stdin", "words"), [
    (["/nonexistent/x.py"], "", "not a candidate file"),
    (["-"], "/nonexistent/y.py\n", "no such candidate file"),
    (["-"], "{not json\n", "not JSON"),
    (["-"], '{"id": "x"}\n', "a line is"),
    (["-"], "\n# nothing\n", "no candidates"),
])
def test_what_cannot_be_read_is_the_users_error(items, stdin, words):
    with pytest.raises(UsageError, match=words):
        many.collect(items, io.StringIO(stdin))


def test_an_empty_folder_and_repeated_ids(tmp_path):
    with pytest.raises(UsageError, match="no candidate files"):
        many.collect([str(tmp_path)])
    (tmp_path / "k.py").write_text(GOOD)
    found = many.collect([str(tmp_path), str(tmp_path / "k.py")])
    assert [c.id for c in found] == ["k", "k#2"] and found[0].path == found[1].path


def test_a_candidate_gone_before_its_turn_is_its_own_error_line(tmp_path):
    """A file listed and then removed (a search pruning its folder) costs its own line, not the run."""
    from gauntlet import discover
    from gauntlet.judge.evaluate import Options
    (tmp_path / "gone.py").write_text(GOOD)
    found = many.collect([str(tmp_path / "gone.py")])
    (tmp_path / "gone.py").unlink()
    out = io.StringIO()
    run = many.Run(1, "cpu")
    many.judge_all(discover.get_problem("gemm"), found, Options(device="cpu"), many.Lines(out, None),
                   _NothingToJudge(), run)
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert line["verdict"] == "error" and line["reasons"][0]["code"] == "import_error" and line["id"] == "gone"
    assert run.summary()["summary"]["verdicts"] == {"error": 1}
    assert not needs.schema_problems(line, "many")


class _NothingToJudge:
    """An executor that fails the test if it is handed a job."""

    def run(self, jobs, on_start=None):
        assert not jobs, f"nothing should be judged, got {[j['path'] for j in jobs]}"
        return iter(())
