"""Bad input gets a clear error blamed on whoever made it, and `--json` prints exactly one JSON object on every path:
usage errors (exit 2, verdict `usage_error`), problem-file errors (blame `problem`), candidate errors (a verdict).
A changed solution is judged again by `gauntlet run`; a killed judge leaves no worker behind."""
import importlib
import json
import re
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import needs

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "bad"
_NOT_COPIED = {".git", ".gauntlet", ".venv", ".pytest_cache", "__pycache__", "results", ".before", ".whl", ".carry"}


def _cli(*args, cwd=ROOT, env=None):
    out = subprocess.run([sys.executable, "-m", "gauntlet", *args], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300)
    return out.returncode, out.stdout, out.stderr


def _one_json(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1, stdout
    return json.loads(lines[0])


@pytest.mark.parametrize(("args", "says"), [
    (["eval", "gemmm", "torch_matmul"], "did you mean 'gemm'"),
    (["eval", "gemm", "torch_matmull"], "did you mean 'torch_matmul'"),
    (["eval", "gemm", "no/such/file.py"], "not found"),
    (["eval", "gemm", "tests"], "not found"),
    (["eval", "gemm", "torch_matmul", "--dtype", "bfloat61"], "unknown dtype"),
    (["eval", "gemm", "torch_matmul", "--case", "M=1,N=1"], "missing ['K']"),
    (["eval", "gemm", "torch_matmul", "--case", "M=1,N=1,K=100000000,seed=1"], "outside the cpu domain"),
    (["eval", "gemm", "torch_matmul", "--case", "M=384,N=384,K=1100,seed=1"], "over the cpu budget"),
    (["eval", "gemm", "torch_matmul", "--case", "M=1,N=1,K=1,seed=-1"], "seed must be"),
    (["eval", "gemm", "torch_matmul", "--timeout", "-5"], "--timeout"),
    (["eval", "gemm", "torch_matmul", "--seed", "-1"], "--seed"),
    (["eval", "gemm", "torch_matmul", "--bogus"], "unrecognized arguments"),
])
def test_usage_errors_are_one_json_object_and_exit_2(args, says):
    code, out, err = _cli(*args, "--device", "cpu", "--json")
    assert code == 2, err
    doc = _one_json(out)
    assert doc["verdict"] == "usage_error" and doc["blame"] == "user" and says in doc["error"], doc


def test_syntax_error_is_an_import_error_with_file_line_and_text():
    code, out, _ = _cli("eval", "gemm", str(BAD / "syntax_error.py"), "--device", "cpu", "--json")
    assert code == 1
    reason = _one_json(out)["reasons"][0]
    assert reason["code"] == "import_error"
    assert "syntax_error.py:4" in reason["detail"] and "def solve(a, b)" in reason["detail"]


def _scratch_repo(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=lambda folder, names: [n for n in names if n in _NOT_COPIED
                                                             or n.endswith(".egg-info")])
    return copy


def test_typo_in_a_problems_baseline_is_blamed_on_the_problem(tmp_path):
    copy = _scratch_repo(tmp_path)
    yaml_path = copy / "problems" / "gemm" / "problem.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("cublas: torch_matmul", "cublas: torch_matmull"))
    env = needs.scratch_env(copy)
    code, out, _ = _cli("eval", "gemm", "torch_matmul", "--device", "cpu", "--no-timing", "--json", cwd=copy, env=env)
    doc = _one_json(out)
    assert code == 2 and doc["blame"] == "problem" and "torch_matmull" in doc["error"], doc
    yaml_path.write_text(yaml_path.read_text().replace("    budget: 1500000", "    budgte: 1500000"))
    code, out, _ = _cli("list", cwd=copy, env=env)
    assert code == 2


def test_run_rejudges_a_changed_solution_and_resumes_an_unchanged_one(tmp_path):
    copy = _scratch_repo(tmp_path)
    env = needs.scratch_env(copy)
    args = ["run", "--problem", "gemm", "--solution", "torch_matmul", "--device", "cpu", "--examples", "2",
            "--dtype", "float32", "--out", str(tmp_path / "results.json")]
    code, _, err = _cli(*args, cwd=copy, env=env)
    assert code == 0 and "new 1" in err, err
    # where this run's time went, largest stage first (start or correctness, as the machine's load has it)
    assert re.search(r"judging time by stage: .*\bcorrectness \d+ s \(\d+%\)", err), err
    code, _, err = _cli(*args, cwd=copy, env=env)
    assert code == 0 and "resumed 1, re-judged 0" in err, err
    assert "judging time by stage" not in err                  # nothing judged in this run
    solution = copy / "solutions" / "gemm" / "torch_matmul.py"
    solution.write_text(solution.read_text().replace("return torch.matmul(a, b)", "return torch.zeros_like(a @ b)"))
    code, _, err = _cli(*args, cwd=copy, env=env)
    assert "re-judging: solution" in err and "re-judged 1" in err, err
    assert code == 1                                     # the broken solution is caught, not kept as a pass
    # ... and the run says why under its progress line, in words, with the replay command that runs as printed
    assert re.search(r"\n    \[mismatch\] \[float32 [^]]*\] norm-wise error is \S+ x the budget \(", err), err
    replay = re.search(r"\n    replay: (.*)", err).group(1)
    assert replay.startswith(f"{sys.executable} -m gauntlet eval gemm {solution} --device cpu --dtype float32 "), err
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [r["verdict"] for r in doc["records"]] == ["fail"]


def _copied_gemm(tmp_path: Path, name: str) -> Path:
    """A user's problem `name`: the shipped gemm copied under tmp_path/problems with its id changed, and an empty
    tmp_path/solutions/<name> beside it. Returns its problem.yaml."""
    shutil.copytree(ROOT / "problems" / "gemm", tmp_path / "problems" / name,
                    ignore=shutil.ignore_patterns("__pycache__"))
    yaml = tmp_path / "problems" / name / "problem.yaml"
    yaml.write_text(yaml.read_text().replace("id: gemm", f"id: {name}"))
    (tmp_path / "solutions" / name).mkdir(parents=True)
    return yaml


def test_run_in_a_users_repository_judges_the_users_solutions_only(tmp_path):
    """A repository with [tool.gauntlet] and problems of its own: `run` judges its solutions, not the shipped ones
    beside them, and says so; a problem copied from a shipped one judges against the shipped baseline as is."""
    (tmp_path / "pyproject.toml").write_text("[tool.gauntlet]\nproblems = 'problems'\n")
    _copied_gemm(tmp_path, "mm")
    (tmp_path / "solutions" / "mm" / "mine.py").write_text("BACKEND = 'torch'\nDTYPES = ('float32',)\n\n"
                                                           "def solve(a, b):\n    return a @ b\n")
    code, _, err = _cli("run", "--device", "cpu", "--no-timing", "--out", "r.json", cwd=tmp_path)
    assert code == 0, err
    assert re.search(r"gauntlet run: your 1 solution\(s\) only, of \d+ on the search path \(--shipped", err), err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [(r["problem"], r["solution"], r["verdict"]) for r in doc["records"]] == [("mm", "mine", "pass")]


def test_run_judges_the_shipped_solutions_when_asked_or_when_there_are_none_of_ones_own(tmp_path):
    from argparse import Namespace

    from gauntlet import searchpath
    from gauntlet.cli import run
    sp = searchpath.SearchPath(problems=(tmp_path / "problems",), solutions=(tmp_path / "solutions",),
                               project=tmp_path)
    mine = (None, Namespace(path=tmp_path / "solutions" / "mm" / "a.py"))
    theirs = (None, Namespace(path=ROOT / "solutions" / "gemm" / "torch_matmul.py"))
    args = Namespace(shipped=False, problem=None, solution=None)
    assert run._own([mine, theirs], sp, args) == [mine]
    assert run._own([mine, theirs], sp, Namespace(shipped=True, problem=None, solution=None)) == [mine, theirs]
    assert run._own([mine, theirs], sp, Namespace(shipped=False, problem=["gemm"], solution=None)) == [mine, theirs]
    checkout = searchpath.SearchPath(problems=(), solutions=(), project=ROOT)
    assert run._own([theirs], checkout, args) == [theirs]
    with pytest.raises(run.UsageError, match=r"hold no solution; add <problem>/<name>.py there, or --shipped"):
        run._own([theirs], sp, args)
    bare = searchpath.SearchPath(problems=(tmp_path / "kernels" / "problems",), solutions=(), project=tmp_path)
    with pytest.raises(run.UsageError, match="no solutions folder beside your problems folder; add "
                       + re.escape(str(tmp_path / "kernels" / "solutions")) + "/<problem>/<name>.py, or --shipped"):
        run._own([theirs], bare, args)


def test_run_skips_a_solution_that_does_not_enter_the_asked_dtype(tmp_path):
    """`run --dtype X` judges the solutions that enter X; one whose DTYPES leaves X out is skipped (no record, not a
    `nothing_judged` failure) and the run says which it skipped."""
    (tmp_path / "pyproject.toml").write_text("[tool.gauntlet]\nproblems = 'problems'\n")
    _copied_gemm(tmp_path, "mm")
    for name, dtypes in (("f32", "('float32',)"), ("bf16", "('bfloat16',)")):
        (tmp_path / "solutions" / "mm" / f"{name}.py").write_text(
            f"BACKEND = 'torch'\nDTYPES = {dtypes}\n\ndef solve(a, b):\n    return a @ b\n")
    args = ["run", "--device", "cpu", "--no-timing", "--out", "r.json", "--dtype", "float32"]
    code, _, err = _cli(*args, cwd=tmp_path)
    assert code == 0, err
    assert "gauntlet run: skipped 1 solution(s) that do not enter --dtype float32" in err and "mm/bf16" in err, err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [(r["solution"], r["verdict"]) for r in doc["records"]] == [("f32", "pass")]
    (tmp_path / "solutions" / "mm" / "f32.py").unlink()
    code, out, _ = _cli(*args, "--json", cwd=tmp_path)
    doc = _one_json(out)
    assert code == 2 and "no solution enters --dtype float32" in doc["error"] and "mm/bf16" in doc["error"], doc


def test_run_keeps_a_solution_whose_dtypes_it_cannot_read_or_that_enters_none():
    """A DTYPES computed at import is unknown to the parent: the solution is judged (the judge sees the real one),
    never skipped unseen; so is one whose DTYPES enters none of its problem's dtypes (`nothing_judged` whatever was
    asked: a broken file); without --dtype nothing is filtered."""
    from argparse import Namespace

    from gauntlet.cli import run
    problem = Namespace(id="mm", dtypes={"float32": None, "bfloat16": None})
    only_bf16 = (problem, Namespace(name="bf16", dtypes=("bfloat16",)))
    unread = (problem, Namespace(name="computed", dtypes=None))
    none = (problem, Namespace(name="none", dtypes=()))
    foreign = (problem, Namespace(name="foreign", dtypes=("float64",)))
    assert run._entering([only_bf16, unread, none, foreign], ["float32"]) == [unread, none, foreign]
    assert run._entering([only_bf16, unread], None) == [only_bf16, unread]
    assert run._entering([only_bf16], ["bfloat16", "float32"]) == [only_bf16]


def test_a_runs_failure_line_is_the_first_line_of_a_multiline_detail():
    from argparse import Namespace

    from gauntlet.cli import output
    detail = ("the import of /x/s.py failed: ModuleNotFoundError: No module named 'nope'\n"
              '  File "/x/s.py", line 2, in <module>\n    import nope')
    record = Namespace(verdict="error", reasons=[{"code": "import_error", "detail": detail, "repro": None}],
                       problem="mm", path="/x/s.py", device="cpu", seed=3)
    said, replay = output.failure_lines(record)
    assert said == "    [import_error] the import of /x/s.py failed: ModuleNotFoundError: No module named 'nope' (...)"
    assert replay.startswith("    replay: ") and replay.endswith("eval mm /x/s.py --device cpu --seed 3"), replay


def test_a_killed_judge_leaves_no_worker_running(tmp_path):
    script = tmp_path / "judge.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from gauntlet.judge.process.isolate import Child
        child = Child("gemm", {str(ROOT / 'solutions' / 'gemm' / 'torch_matmul.py')!r}, "torch", "cpu")
        print(child.proc.pid, flush=True)
        time.sleep(120)
    """))
    judge = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = int(judge.stdout.readline())
    os.kill(judge.pid, signal.SIGKILL)
    judge.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{worker}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.2)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its judge")


def test_bare_gauntlet_lists_its_commands_and_version_says_which():
    code, out, err = _cli()
    assert code == 2 and "commands:" in err and "eval-many" in err and "compare" in err and "required" not in err
    code, out, _ = _cli("--version")
    assert code == 0 and out.startswith("gauntlet ")


@pytest.mark.parametrize(("args", "says"), [
    (["--examples", "abc"], "--examples: must be a positive integer, got 'abc'"),
    (["--examples", "0"], "--examples: must be a positive integer, got '0'"),
    (["--timeout", "soon"], "--timeout: must be a number of seconds"),
    (["--seed", "x"], "--seed: must be an integer in [0, 2**31)"),
])
def test_a_malformed_number_says_what_was_wanted(args, says):
    code, _, err = _cli("eval", "gemm", "torch_matmul", "--device", "cpu", *args)
    assert code == 2 and says in err and "_positive" not in err and "_seconds" not in err, err


def test_one_broken_problem_does_not_stop_the_listing(tmp_path):
    broken = tmp_path / "problems" / "broken_one"
    broken.mkdir(parents=True)
    (broken / "problem.yaml").write_text("title: broken\nbogus_key: 1\n")
    (broken / "reference.py").write_text("def reference(a):\n    return a\n")
    code, out, err = _cli("list", "--problems", str(tmp_path / "problems"))
    assert code == 2, err
    assert "broken_one: cannot be loaded (the problem's error)" in out
    assert "gemm:" in out and "int8_gemm:" in out          # the shipped problems after it are still listed


def test_a_record_without_a_backend_says_so_in_words():
    code, out, _ = _cli("eval", "gemm", str(BAD / "syntax_error.py"), "--device", "cpu")
    assert code == 1 and "[no BACKEND]" in out and "[None]" not in out


def test_list_json_is_one_object_and_names_the_broken_problem(tmp_path):
    broken = tmp_path / "problems" / "broken_one"
    broken.mkdir(parents=True)
    (broken / "problem.yaml").write_text("title: broken\nbogus_key: 1\n")
    (broken / "reference.py").write_text("def reference(a):\n    return a\n")
    code, out, _ = _cli("list", "--problems", str(tmp_path / "problems"), "--json")
    assert code == 2
    doc = _one_json(out)
    assert doc["schema"] == "gauntlet.list/1" and doc["backends"]["torch"]["cpu"]["ok"] is True
    assert [b["id"] for b in doc["broken"]] == ["broken_one"]
    gemm = next(p for p in doc["problems"] if p["id"] == "gemm")
    assert gemm["shipped"] and "bfloat16" in gemm["dtypes"] and "torch_matmul" in [s["name"] for s in gemm["solutions"]]


def test_a_harness_bug_outside_a_judgement_is_blamed_on_the_harness_not_the_user(monkeypatch, capsys):
    """A ValueError from Gauntlet's own code (here `list` made to raise one) is an internal error: exit 3, one JSON
    object blaming the harness, the traceback on stderr. It used to be caught as a usage error blamed on the user."""
    from gauntlet.cli import list as list_cmd
    cli_main = importlib.import_module("gauntlet.cli.main")

    def broken(args):
        raise ValueError("an index the harness got wrong")
    monkeypatch.setattr(list_cmd, "run", broken)
    code = cli_main.main(["list", "--json"])
    out, err = capsys.readouterr()
    assert code == cli_main.INTERNAL_ERROR == 3
    doc = _one_json(out)
    assert doc == {"schema": "gauntlet.eval/1", "verdict": "internal_error", "blame": "harness",
                   "error": "ValueError: an index the harness got wrong"}
    assert "internal error (a bug in Gauntlet" in err and "Traceback" in err
    _validate(doc)


def test_what_the_user_gave_is_still_the_user_s_usage_error(capsys):
    """The settings once checked with a plain ValueError are UsageErrors now: still exit 2, said as the user's."""
    cli_main = importlib.import_module("gauntlet.cli.main")
    code = cli_main.main(["eval-many", "gemm", str(ROOT / "solutions" / "gemm" / "torch_matmul.py"), "--device",
                          "cpu", "--gpus", "all"])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert "gauntlet: error: --gpus all on the CPU" in err and "internal error" not in err


def _validate(doc: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "harness" / "schemas" / "eval.schema.json").read_text())
    jsonschema.validate(doc, schema)


def test_a_new_users_errors_say_what_exists_and_what_to_write(tmp_path):
    """A missing file lists what is there; a failed import says so, with the candidate's own traceback; a KernelBench
    file on a problem without a mapping gets the `kernelbench:` line to add."""
    bad = tmp_path / "bad.py"
    bad.write_text("import nonexistent_mod\nBACKEND = 'torch'\n\ndef solve(a, b):\n    return a @ b\n")
    code, _, err = _cli("eval", "gemm", "missing.py", "--device", "cpu", cwd=tmp_path)
    assert code == 2 and f"solution file not found: missing.py ({tmp_path} holds bad.py); solutions of gemm by " \
                          "name: " in err and "torch_matmul" in err, err
    code, out, _ = _cli("eval", "gemm", "bad.py", "--device", "cpu", "--no-timing", "--dtype", "float32", cwd=tmp_path)
    assert code == 1, out
    assert f"  [import_error] the import of {bad} failed: ModuleNotFoundError: No module named 'nonexistent_mod'\n" \
           f'  File "{bad}", line 1, in <module>\n' in out, out
    assert "float32   skipped: not judged: its import failed (import_error below)" in out
    assert "worker.py" not in out and "did not start" not in out

    shutil.copytree(ROOT / "problems" / "gemm", tmp_path / "problems" / "mm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    yaml = tmp_path / "problems" / "mm" / "problem.yaml"
    yaml.write_text(re.sub(r"\nkernelbench:.*\n", "\n", yaml.read_text().replace("id: gemm", "id: mm")))
    (tmp_path / "kb.py").write_text("import torch\n\nclass ModelNew(torch.nn.Module):\n"
                                    "    def forward(self, a, b):\n        return a @ b\n")
    code, _, err = _cli("eval", "mm", "kb.py", "--device", "cpu", "--problems", "problems", cwd=tmp_path)
    assert code == 2 and f"To judge one, add to {yaml}:\n  kernelbench: {{inputs: [a, b]}}\n" in err, err


def test_run_judges_the_other_problems_when_one_is_broken_and_blames_its_author(tmp_path):
    """A typo in one problem.yaml of a user's repository: `run` judges the other problems, says which one it left out
    and why, keeps that in the results file (`problem_errors`, blamed on the problem) and exits 1; with every problem
    broken there is nothing to judge, and the error is the problem's (exit 2)."""
    (tmp_path / "pyproject.toml").write_text("[tool.gauntlet]\nproblems = 'problems'\n")
    for name in ("good", "typo"):
        _copied_gemm(tmp_path, name)
        (tmp_path / "solutions" / name / "mm.py").write_text(
            "BACKEND = 'torch'\nDTYPES = ('float32',)\n\ndef solve(a, b):\n    return a @ b\n")
    yaml = tmp_path / "problems" / "typo" / "problem.yaml"
    yaml.write_text(yaml.read_text().replace("k_norm:", "k_nrom:", 1))
    args = ["run", "--device", "cpu", "--no-timing", "--out", "r.json", "--dtype", "float32"]
    code, out, err = _cli(*args, "--json", cwd=tmp_path)
    assert code == 1, err
    assert "problem 'typo' is not judged" in err and "k_nrom" in err, err
    doc = _one_json(out)
    assert [(r["problem"], r["verdict"]) for r in doc["records"]] == [("good", "pass")]
    assert [(e["problem"], e["blame"]) for e in doc["problem_errors"]] == [("typo", "problem")]
    assert "k_nrom" in doc["problem_errors"][0]["error"]
    assert json.loads((tmp_path / "r.json").read_text())["problem_errors"] == doc["problem_errors"]
    shutil.rmtree(tmp_path / "problems" / "good")
    code, out, _ = _cli(*args, "--json", cwd=tmp_path)
    doc = _one_json(out)
    assert code == 2 and doc["blame"] == "problem" and "k_nrom" in doc["error"], doc
