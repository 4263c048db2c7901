"""The search path for a user's own problems and solutions (gauntlet.searchpath, gauntlet.discover): which setting
wins, what an id found twice means, where the judge keeps its state, and that the worker judges against the very
files the parent resolved (not a problem of the same id found again elsewhere)."""
import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from gauntlet import discover, searchpath
from gauntlet.judge.evaluate import Options, evaluate
from gauntlet.judge.process import audit
from gauntlet.judge.process.isolate import Child
from gauntlet.judge.records import fingerprint
from gauntlet.judge.values import failures
from gauntlet.searchpath import SearchPathError, resolve

SHIPPED_PROBLEMS, SHIPPED_SOLUTIONS = searchpath.shipped_folders()
pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _restore_search_path():
    previous = discover.use(None)
    yield
    discover.use(previous)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _project(root: Path, config: str = 'problems = ["kernels/problems"]') -> Path:
    _write(root / "pyproject.toml", f"[project]\nname = 'mine'\n\n[tool.gauntlet]\n{config}\n")
    (root / "kernels" / "problems").mkdir(parents=True, exist_ok=True)
    (root / "kernels" / "solutions").mkdir(parents=True, exist_ok=True)
    return root


def _copy_problem(src_id: str, dest: Path) -> Path:
    shutil.copytree(SHIPPED_PROBLEMS / src_id, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


# --- which setting wins --------------------------------------------------------------------------------------------

def test_cli_beats_env_beats_pyproject_and_paths_are_relative_to_their_source(tmp_path, monkeypatch):
    project = _project(tmp_path)
    for name in ("from_env", "from_env2", "from_cli"):
        (tmp_path / name).mkdir()
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)                  # the pyproject.toml is found by walking up

    by_config = resolve(environ={})
    assert by_config.problems == ((project / "kernels" / "problems").resolve(),)
    assert by_config.solutions == ((project / "kernels" / "solutions").resolve(),)     # beside the problems
    assert by_config.project == project.resolve() and by_config.config == (project / "pyproject.toml").resolve()

    monkeypatch.chdir(tmp_path)
    env = {"GAUNTLET_PROBLEMS": os.pathsep.join(["from_env", "", "from_env2"])}
    by_env = resolve(environ=env)
    assert by_env.problems == ((tmp_path / "from_env").resolve(), (tmp_path / "from_env2").resolve())
    assert dict(by_env.origins)["problems"] == "set by GAUNTLET_PROBLEMS"

    by_cli = resolve(problems=["from_cli"], environ=env)
    assert by_cli.problems == ((tmp_path / "from_cli").resolve(),)
    assert by_cli.solutions == ()           # no solutions/ beside from_cli, and none set anywhere
    assert by_cli.project == project.resolve()       # state stays in the project whatever the source


def test_solutions_key_is_separate_and_shipped_can_be_left_out(tmp_path, monkeypatch):
    _project(tmp_path, 'problems = "kernels/problems"\nsolutions = ["elsewhere"]\nshipped = false')
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    sp = resolve(environ={})
    assert sp.solutions == ((tmp_path / "elsewhere").resolve(),) and sp.shipped is False
    assert resolve(solutions=["kernels/solutions"], environ={}).solutions == \
        ((tmp_path / "kernels" / "solutions").resolve(),)
    discover.use(sp)
    assert discover.problem_ids() == []     # no problems of the user's yet, and the shipped ones are left out


def test_without_any_setting_only_the_shipped_problems_are_seen(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sp = resolve(environ={})
    assert sp.problems == () and sp.solutions == () and sp.shipped and sp.config is None
    assert sp.project == tmp_path.resolve()      # no pyproject.toml above: the current directory
    assert "gemm" in discover.problem_ids(sp)


@pytest.mark.parametrize(("config", "says"), [
    ('problem = ["kernels/problems"]', "unknown key(s) ['problem']"),
    ('problems = ["nowhere"]', "does not exist"),
    ('problems = ["kernels/problems/p"]', "is one problem"),
    ("problems = 3", "a path or a list of paths"),
    ('shipped = "no"', "true or false"),
    ("problems = [", "not valid TOML"),
])
def test_a_bad_tool_gauntlet_table_is_the_users_error_naming_the_file(tmp_path, monkeypatch, config, says):
    _project(tmp_path, config)
    _copy_problem("gemm", tmp_path / "kernels" / "problems" / "p")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SearchPathError, match="pyproject.toml") as err:
        resolve(environ={})
    assert says in str(err.value)


def test_the_nearest_pyproject_with_a_tool_gauntlet_table_is_used(tmp_path, monkeypatch):
    outer = _project(tmp_path)
    inner = tmp_path / "pkg"
    _write(inner / "pyproject.toml", "[project]\nname = 'inner-gauntlet-user'\n")    # no table: skipped
    monkeypatch.chdir(inner)
    sp = resolve(environ={})
    assert sp.config == (outer / "pyproject.toml").resolve() and sp.project == outer.resolve()


# --- ids found twice -------------------------------------------------------------------------------------------

def test_a_users_problem_shadows_the_shipped_one_and_drops_its_shipped_solutions(tmp_path):
    _project(tmp_path)
    mine = _copy_problem("gemm", tmp_path / "kernels" / "problems" / "gemm")
    _write(tmp_path / "kernels" / "solutions" / "gemm" / "torch_matmul.py", "BACKEND = 'torch'\n"
                                                                          "def solve(a, b):\n    return a @ b\n")
    sp = resolve(problems=[str(tmp_path / "kernels" / "problems")], environ={})
    located = discover.locate_problems(sp)
    assert located["gemm"].folder == mine.resolve() and located["gemm"].shadows == SHIPPED_PROBLEMS / "gemm"
    assert located["bmm"].shipped                    # the other shipped problems are still there
    assert [s.name for s in discover.solutions_for("gemm", sp)] == ["torch_matmul"]   # not triton_tiled & co
    problem = discover.get_problem("gemm", sp)
    assert problem.root == mine.resolve()
    assert problem.baseline_paths == {"cublas": (tmp_path / "kernels/solutions/gemm/torch_matmul.py").resolve()}


def test_a_users_kernel_for_a_shipped_problem_joins_the_shipped_solutions(tmp_path):
    _project(tmp_path)
    _write(tmp_path / "kernels" / "solutions" / "gemm" / "mine.py", "BACKEND = 'torch'\n")
    sp = resolve(problems=[str(tmp_path / "kernels" / "problems")], environ={})
    names = [s.name for s in discover.solutions_for("gemm", sp)]
    assert "mine" in names and "torch_matmul" in names
    # and its baseline is still the shipped one
    assert discover.get_problem("gemm", sp).baseline_paths["cublas"] == SHIPPED_SOLUTIONS / "gemm" / "torch_matmul.py"


def test_the_same_id_in_two_of_the_users_folders_is_an_error_naming_both(tmp_path):
    a = _copy_problem("gemm", tmp_path / "a" / "mm")
    b = _copy_problem("gemm", tmp_path / "b" / "mm")
    for folder in (a, b):
        (folder / "problem.yaml").write_text((folder / "problem.yaml").read_text().replace("id: gemm", "id: mm"))
    sp = resolve(problems=[str(tmp_path / "a"), str(tmp_path / "b")], environ={})
    with pytest.raises(SearchPathError, match="two of your problem folders") as err:
        discover.problem_ids(sp)
    assert str(a.resolve()) in str(err.value) and str(b.resolve()) in str(err.value)


def test_a_solution_name_found_twice_is_an_error_naming_both_files(tmp_path):
    _write(tmp_path / "sol" / "gemm" / "triton_tiled.py", "BACKEND = 'triton'\n")
    sp = searchpath.SearchPath(problems=(), solutions=((tmp_path / "sol").resolve(),), project=tmp_path)
    with pytest.raises(SearchPathError, match="found twice") as err:
        discover.solutions_for("gemm", sp)
    assert str(SHIPPED_SOLUTIONS / "gemm" / "triton_tiled.py") in str(err.value)


def test_a_missing_baseline_names_the_folders_searched(tmp_path):
    _project(tmp_path)
    _copy_problem("gemm", tmp_path / "kernels" / "problems" / "mm")
    yaml = tmp_path / "kernels" / "problems" / "mm" / "problem.yaml"
    yaml.write_text(yaml.read_text().replace("id: gemm", "id: mm"))
    (yaml.parent / "reference.py").write_text((yaml.parent / "reference.py").read_text() + "\n# mine now\n")
    sp = resolve(problems=[str(tmp_path / "kernels" / "problems")], environ={})
    with pytest.raises(discover.ProblemError, match="baseline 'cublas' names solution 'torch_matmul'"):
        discover.get_problem("mm", sp)


def test_a_users_problem_takes_a_shipped_solution_as_its_baseline_by_problem_and_name(tmp_path):
    """`gemm/torch_matmul`: another problem's solution, Gauntlet's own included, also for a copy of a shipped problem
    that shadows it (whose shipped solutions are otherwise left out)."""
    _project(tmp_path)
    for pid in ("mm", "gemm"):
        yaml = _copy_problem("gemm", tmp_path / "kernels" / "problems" / pid) / "problem.yaml"
        yaml.write_text(yaml.read_text().replace("id: gemm", f"id: {pid}").replace("cublas: torch_matmul",
                                                                                   "cublas: gemm/torch_matmul"))
    sp = resolve(problems=[str(tmp_path / "kernels" / "problems")], environ={})
    for pid in ("mm", "gemm"):
        want = {"cublas": SHIPPED_SOLUTIONS / "gemm" / "torch_matmul.py"}
        assert discover.get_problem(pid, sp).baseline_paths == want
    assert discover.solutions_for("gemm", sp) == []        # the shadowed problem's shipped solutions stay out


def test_a_copied_problem_takes_the_shipped_baseline_as_it_is(tmp_path):
    """A shipped problem copied as it is (under its own id, or renamed) judges as copied: its plain baseline name
    resolves through the shipped problem's solutions when the user's folders lack it."""
    _project(tmp_path)
    _copy_problem("gemm", tmp_path / "kernels" / "problems" / "gemm")
    yaml = _copy_problem("gemm", tmp_path / "kernels" / "problems" / "mygemm") / "problem.yaml"
    yaml.write_text(yaml.read_text().replace("id: gemm", "id: mygemm"))
    sp = resolve(problems=[str(tmp_path / "kernels" / "problems")], environ={})
    for pid in ("gemm", "mygemm"):
        want = {"cublas": SHIPPED_SOLUTIONS / "gemm" / "torch_matmul.py"}
        assert discover.get_problem(pid, sp).baseline_paths == want
    assert discover.solutions_for("gemm", sp) == []        # the shadowed problem's shipped solutions stay out


def test_a_baseline_missing_from_a_changed_copy_says_what_to_write(tmp_path):
    """Once its reference is its own, a shipped kernel no longer answers its question: the baseline must be
    written, and the error says how."""
    _project(tmp_path)
    folder = _copy_problem("gemm", tmp_path / "kernels" / "problems" / "gemm")
    (folder / "reference.py").write_text((folder / "reference.py").read_text() + "\n# changed\n")
    sp = resolve(problems=[str(tmp_path / "kernels" / "problems")], environ={})
    with pytest.raises(discover.ProblemError, match="write `cublas: gemm/torch_matmul` under `baselines:`"):
        discover.get_problem("gemm", sp)


@pytest.mark.parametrize("name", ["gemm/torch_matmul/x", "/torch_matmul", "gemm/", "../torch_matmul", 3])
def test_a_malformed_baseline_is_the_problems_error(tmp_path, name):
    _project(tmp_path)
    yaml = _copy_problem("gemm", tmp_path / "kernels" / "problems" / "mm") / "problem.yaml"
    yaml.write_text(yaml.read_text().replace("id: gemm", "id: mm").replace("cublas: torch_matmul", f"cublas: {name}"))
    sp = resolve(problems=[str(tmp_path / "kernels" / "problems")], environ={})
    with pytest.raises(discover.ProblemError, match=r"baseline 'cublas' must be a solution's name .* or PROBLEM/NAME"):
        discover.get_problem("mm", sp)


def test_the_plugin_fails_a_broken_problems_items_in_one_line_and_judges_the_rest(pytester):
    """A typo in one problem.yaml fails that problem's solutions, each one item naming the file and the key; the
    session goes on (no "Interrupted: 1 error during collection") and judges the other problems' kernels. A
    problem with no solutions is said, with the file to add."""
    _project(pytester.path)
    for pid in ("mm", "mm2", "lonely"):
        yaml = _copy_problem("gemm", pytester.path / "kernels" / "problems" / pid) / "problem.yaml"
        yaml.write_text(yaml.read_text().replace("id: gemm", f"id: {pid}"))
    yaml = pytester.path / "kernels" / "problems" / "mm" / "problem.yaml"
    yaml.write_text(yaml.read_text().replace("benchmark:", "benchmrk:"))
    for pid in ("mm", "mm2"):
        _write(pytester.path / "kernels" / "solutions" / pid / "mine.py", "BACKEND = 'torch'\n"
               "DTYPES = ('float32',)\n\ndef solve(a, b):\n    return a @ b\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", "--gauntlet-examples", "1", "--gauntlet-device",
                                "cpu", *([] if _plugin_installed() else ["-p", "gauntlet.plugin"]))
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "error during collection" not in out and "Traceback" not in out and "discover.py" not in out
    result.stdout.fnmatch_lines([f"gauntlet: problem 'lonely' (*lonely) has no solutions to judge: add "
                                 f"{pytester.path / 'kernels' / 'solutions' / 'lonely'}/NAME.py"])
    result.stdout.fnmatch_lines(["*mm/mine[[]problem[]]: gauntlet: the problem, not this kernel, is at fault: "
                                 "*mm/problem.yaml: the top level has unknown key(s) [[]'benchmrk'[]]*"])
    result.assert_outcomes(failed=1, passed=1, skipped=3)      # mm2: float32 judged, its other dtypes skipped


def test_solution_files_named_on_the_command_line_are_judged_not_imported(pytester):
    # Two kernels of one file name in two problems' folders, each leaving a mark if imported: named on the command
    # line (as a CI job naming the files it changed does), both are collected as judgements and neither is imported
    # by pytest itself (the python plugin would run candidate code in the pytest process).
    _project(pytester.path)
    marks = []
    for pid in ("gemm", "bmm"):
        mark = pytester.path / f"imported_{pid}"
        _write(pytester.path / "kernels" / "solutions" / pid / "mine.py",
               f"BACKEND = 'torch'\nopen({str(mark)!r}, 'w').close()\n\n"
               "def solve(*a):\n    raise NotImplementedError\n")
        marks.append(mark)
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q",
                                "kernels/solutions/gemm/mine.py", "kernels/solutions/bmm/mine.py",
                                *([] if _plugin_installed() else ["-p", "gauntlet.plugin"]))
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out
    assert "import file mismatch" not in out and "error" not in out.lower()
    result.stdout.fnmatch_lines(["*gemm/mine.py::gemm/mine[[]bfloat16[]]*", "*bmm/mine.py::bmm/mine[[]bfloat16[]]*"])
    assert not any(m.exists() for m in marks)


def _plugin_installed() -> bool:
    from importlib import metadata
    return any(ep.name == "gauntlet" for ep in metadata.entry_points(group="pytest11"))


# --- state and watched files follow the resolved locations ----------------------------------------------------------

def test_failing_cases_and_watched_files_follow_the_users_project(tmp_path, monkeypatch):
    project = _project(tmp_path)
    mine = _copy_problem("gemm", project / "kernels" / "problems" / "gemm")
    _write(project / "kernels" / "solutions" / "gemm" / "torch_matmul.py", "BACKEND = 'torch'\n")
    monkeypatch.chdir(project)
    monkeypatch.setattr(failures, "DIR", None)
    discover.use(resolve(environ={}))
    assert failures.folder() == project.resolve() / ".gauntlet" / "failures"
    problem = discover.get_problem("gemm")
    watched = audit.watched_paths(problem)
    assert mine.resolve() in watched and (project / "pyproject.toml").resolve() in watched
    assert (project / "kernels/solutions/gemm/torch_matmul.py").resolve() in watched
    digest = audit.source_tree_digest(watched)
    assert str((mine / "reference.py").resolve()) in digest          # outside the checkout: named absolutely
    theirs = searchpath.SearchPath(problems=(), solutions=(), project=project)      # the shipped ones only
    shipped = discover.get_problem("gemm", theirs)
    assert shipped.root == SHIPPED_PROBLEMS / "gemm"
    ours = fingerprint.fingerprint(problem, discover.get_solution("gemm", "torch_matmul"), Options())
    shipped_print = fingerprint.fingerprint(shipped, discover.get_solution("gemm", "torch_matmul", theirs), Options())
    assert ours["baselines"] != shipped_print["baselines"]          # the hash follows the files in force


def test_the_worker_judges_against_the_files_the_parent_resolved(tmp_path):
    """A user's `gemm` whose inputs differ from the shipped gemm's: a worker that found the shipped one again by id
    would make other inputs than the parent checks against (input_mutated / mismatch), not a pass."""
    mine = _copy_problem("gemm", tmp_path / "problems" / "gemm")
    ref = mine / "reference.py"
    ref.write_text(ref.read_text().replace("manual_seed(seed)", "manual_seed(seed + 12345)"))
    solution = _write(tmp_path / "solutions" / "gemm" / "torch_matmul.py",
                      "import torch\nBACKEND = 'torch'\n\ndef solve(a, b):\n    return torch.matmul(a, b)\n")
    discover.use(resolve(problems=[str(tmp_path / "problems")], environ={}))
    problem = discover.get_problem("gemm")
    assert problem.root == mine.resolve()
    record = evaluate(problem, discover.get_solution("gemm", str(solution)),
                      Options(device="cpu", dtypes=("float32",), case="M=33,N=17,K=65,seed=3"))
    assert record.verdict == "pass", record.reasons
    with Child(problem, None, "torch", "cpu", role="baseline") as base:    # the baselines travel as files too
        baselines_arg = base.proc.args[base.proc.args.index("gauntlet.child.worker") + 8]   # gauntlet.child.worker
        assert base.hello["ok"] and str(solution.resolve()) in baselines_arg


def test_naming_the_shipped_folders_as_ones_own_changes_nothing():
    sp = searchpath.SearchPath(problems=(SHIPPED_PROBLEMS,), solutions=(SHIPPED_SOLUTIONS,), project=SHIPPED_PROBLEMS)
    assert discover.locate_problems(sp)["gemm"] == discover.Located(SHIPPED_PROBLEMS / "gemm", shipped=True)
    assert "triton_tiled" in [s.name for s in discover.solutions_for("gemm", sp)]     # not "found twice"


# --- the command line ----------------------------------------------------------------------------------------------

def test_cli_problems_option_lists_the_users_problem_and_its_shadowing(tmp_path, monkeypatch, capsys):
    from gauntlet import cli
    monkeypatch.chdir(tmp_path)                               # no pyproject.toml here: only --problems says where
    _copy_problem("gemm", tmp_path / "mine" / "problems" / "gemm")
    _write(tmp_path / "mine" / "solutions" / "gemm" / "torch_matmul.py", "BACKEND = 'torch'\n")
    assert cli.main(["list", "--problems", "mine/problems"]) == 0
    out = capsys.readouterr().out
    assert f"problems from: {tmp_path.resolve() / 'mine' / 'problems'} (set by --problems); shipped" in out
    assert f"folder:    {tmp_path.resolve() / 'mine/problems/gemm'} (shadows the shipped gemm)" in out
    assert discover.use(None) is None                       # main put the search path back


def test_cli_problems_option_naming_no_folder_is_a_usage_error_in_json(tmp_path, monkeypatch, capsys):
    from gauntlet import cli
    monkeypatch.chdir(tmp_path)
    assert cli.main(["eval", "gemm", "torch_matmul", "--problems", "nowhere", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "usage_error" and doc["blame"] == "user" and "does not exist" in doc["error"]


@pytest.mark.parametrize(("env", "gpus", "want"), [
    ({"PYTEST_XDIST_WORKER": "gw5", "PYTEST_XDIST_WORKER_COUNT": "8"}, 4, ("1", "2")),
    ({"PYTEST_XDIST_WORKER": "gw3", "PYTEST_XDIST_WORKER_COUNT": "8"}, 1, ("0", "8")),
    ({"PYTEST_XDIST_WORKER": "gw3", "PYTEST_XDIST_WORKER_COUNT": "4", "CUDA_VISIBLE_DEVICES": "2,5"}, 8, ("5", "2")),
    ({"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2", "GAUNTLET_JUDGES_PER_GPU": "3"}, 1, ("0", "3")),
    ({"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"}, 0, (None, None)),
    ({"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2", "CUDA_VISIBLE_DEVICES": ""}, 4, ("", None)),
    ({"PYTEST_XDIST_WORKER_COUNT": "2"}, 4, (None, None)),
])
def test_each_xdist_worker_gets_a_gpu_of_its_own_from_the_installed_plugin(env, gpus, want):
    """gauntlet.plugin.pin_xdist_worker (shipped in the wheel, unlike the checkout's conftest.py): round-robin over
    the GPUs the worker may see, and how many judges share each GPU; nothing without GPUs or outside xdist."""
    from gauntlet.plugin import pin_xdist_worker
    environ = dict(env)
    pin_xdist_worker(environ, lambda: gpus)
    assert (environ.get("CUDA_VISIBLE_DEVICES"), environ.get("GAUNTLET_JUDGES_PER_GPU")) == want


@pytest.mark.parametrize(("env", "cores", "want"), [
    ({"PYTEST_XDIST_WORKER": "gw5", "PYTEST_XDIST_WORKER_COUNT": "14"}, 16, "1"),
    ({"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "4"}, 16, "4"),
    ({"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "8"}, 2, "1"),
    ({"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "4", "OMP_NUM_THREADS": "6"}, 16, "6"),
    ({"PYTEST_XDIST_WORKER_COUNT": "4"}, 16, None),
])
def test_each_xdist_worker_gets_its_share_of_the_cores(env, cores, want):
    """gauntlet.plugin.share_cpu_threads: cores over workers for OpenMP, unless the user set it; nothing outside
    xdist."""
    from gauntlet.plugin import share_cpu_threads
    environ = dict(env)
    share_cpu_threads(environ, lambda: cores)
    assert environ.get("OMP_NUM_THREADS") == want


def test_gauntlet_new_makes_problems_that_judge_as_made(tmp_path):
    """`gauntlet new myop` (the template, with its baseline) and `gauntlet new mygemm --from gemm` in a project with
    no setting yet: the problems folder is made and registered in pyproject.toml, and each problem judges."""
    import subprocess
    import sys

    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "gauntlet", *args], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
        return out.returncode, out.stdout + out.stderr

    code, said = cli("new", "myop")
    assert code == 0 and "baselines: eager: torch_eager" in said, said
    assert 'problems = "problems"' in (tmp_path / "pyproject.toml").read_text()
    code, said = cli("new", "mygemm", "--from", "gemm")
    assert code == 0 and "baselines: cublas: gemm/torch_matmul" in said, said
    assert "id: mygemm" in (tmp_path / "problems" / "mygemm" / "problem.yaml").read_text()
    (tmp_path / "solutions" / "mygemm" / "mine.py").write_text("BACKEND = 'torch'\n\ndef solve(a, b):\n"
                                                                "    return a @ b\n")
    for problem, solution in (("myop", "torch_eager"), ("mygemm", "mine")):
        code, said = cli("eval", problem, solution, "--device", "cpu", "--examples", "1")
        assert code == 0 and f"{problem} / {solution} [torch] on cpu: PASS" in said, said
    code, said = cli("new", "myop")
    assert code == 2 and "problem 'myop' exists already" in said, said
    code, said = cli("new", "x", "--from", "gemmm")
    assert code == 2 and "did you mean 'gemm'" in said, said
