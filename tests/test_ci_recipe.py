"""The CI recipe for GPU runners (examples/ci/gauntlet-gpu.yml), run on the CPU: its judge, compare and store steps,
exactly as written in the workflow, with the workflow's own env settings swapped for CPU ones, in a user's project
judged once (one kernel right, one wrong), through pytest-xdist as on a runner. Then the gate: no stored results
yet (main's first run), results as main's (the kernel that fails failed on main too: quiet), and main's results
with a planted pass for the kernel that fails now (a regression: the step fails and its summary names it).

Run as GitHub runs a `run:` step on Linux: `bash --noprofile --norc -eo pipefail` on the step's script, with
GITHUB_OUTPUT, GITHUB_STEP_SUMMARY and GITHUB_PATH files; `pytest` and `gauntlet` are this environment's."""
import json
import os
import stat
import sys
from pathlib import Path

import pytest
import yaml

from tests import needs
from tests.test_install import PROJECT, _make_project, _run

CHECKOUT = Path(__file__).resolve().parents[1]
WORKFLOW = CHECKOUT / "examples" / "ci" / "gauntlet-gpu.yml"
ON_THE_CPU = {"GAUNTLET_DEVICE": "cpu", "GAUNTLET_WORKERS": "1", "GAUNTLET_PYTEST_ARGS": "--gauntlet-examples 1"}
TESTED = ("judge", "compare", "store")           # the steps that run Gauntlet (install and the PR comment do not)


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _steps() -> dict:
    return {step["id"]: step for step in _workflow()["jobs"]["judge"]["steps"] if "id" in step}


def _shims(folder: Path) -> Path:
    """`pytest` and `gauntlet` of this interpreter (a venv that sees system packages may have neither script)."""
    folder.mkdir()
    for name, module in (("pytest", "pytest"), ("gauntlet", "gauntlet")):
        path = folder / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m {module} "$@"\n')
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return folder


class Runner:
    """One job's workspace: the project, the workflow's env (CPU settings), and GitHub's step files."""

    def __init__(self, root: Path):
        self.project = _make_project(root / "project", PROJECT)
        self.github = root / "github"
        self.github.mkdir()
        bin_ = _shims(root / "bin")
        outer = {k: v for k, v in os.environ.items()
                 if not k.startswith(("GAUNTLET_", "PYTEST_", "GITHUB_")) and k != "PYTHONPATH"}
        self.env = needs.plugin_env({**outer, **{k: str(v) for k, v in _workflow()["env"].items()}, **ON_THE_CPU,
                                     "PATH": f"{bin_}{os.pathsep}{outer.get('PATH', '')}", "PYTHONNOUSERSITE": "1"})

    def run(self, step_id: str, **env) -> tuple[int, str]:
        step = _steps()[step_id]
        script = self.github / f"{step_id}.sh"
        script.write_text(step["run"])
        files = {name: self.github / f"{step_id}.{name.lower()}" for name in
                 ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH")}
        for path in files.values():
            path.write_text("")
        step_env = {k: str(v) for k, v in (step.get("env") or {}).items()}
        code, out = _run(["bash", "--noprofile", "--norc", "-eo", "pipefail", script], self.project,
                         {**self.env, **step_env, **{k: str(v) for k, v in files.items()}, **env}, timeout=600)
        self.summary = files["GITHUB_STEP_SUMMARY"].read_text()
        return code, out

    def path(self, env_name: str) -> Path:
        return self.project / self.env[env_name]


def test_the_tested_steps_take_their_settings_from_env_and_the_workflow_is_not_active_here():
    steps = _steps()
    assert set(TESTED) <= set(steps)
    for step_id in TESTED:
        assert "${{" not in steps[step_id]["run"], f"step {step_id!r} must read env, not expressions"
    assert set(ON_THE_CPU) <= set(_workflow()["env"])
    assert WORKFLOW.parent != CHECKOUT / ".github" / "workflows"


def test_the_recipe_judges_once_and_gates_on_main_s_stored_results(tmp_path):
    """One judgement of the project, then the gate three ways. One test, not a module fixture: under pytest-xdist
    a module fixture is made again in every worker that runs one of its tests, and these steps share a workspace."""
    job = Runner(tmp_path)
    code, out = job.run("judge")            # pytest exits 1 (wrong_sign fails); the step accepts it
    assert code == 0 and "pytest exit status 1" in out and "1 failed, 1 passed" in out, out
    results, base = job.path("GAUNTLET_RESULTS"), job.path("GAUNTLET_BASE")
    doc = json.loads(results.read_text())
    assert {r["solution"]: r["verdict"] for r in doc["records"]} == {"fused": "pass", "wrong_sign": "fail"}

    # main's first run: nothing stored yet, nothing compared; then its results are stored
    assert not base.exists()
    code, out = job.run("compare")
    assert code == 0 and "No results stored by main yet" in job.summary, out
    code, out = job.run("store")
    assert code == 0 and base.read_bytes() == results.read_bytes(), out

    # a branch judged as main was: wrong_sign failed on main too, a known failure, not this change's regression
    code, out = job.run("compare")
    assert code == 0 and "**0 regression(s)**" in job.summary, out + job.summary
    assert job.path("GAUNTLET_MARKDOWN").is_file()

    # main's results with a planted pass for wrong_sign: the kernel passed on main and fails now
    for record in doc["records"]:
        if record["solution"] == "wrong_sign":
            record.update(verdict="pass", reasons=[])
    base.write_text(json.dumps(doc))
    code, out = job.run("compare")
    assert code == 1, out
    assert "**1 regression(s)**" in job.summary, job.summary
    assert "| scale_add/wrong_sign@cpu | fail | mismatch |" in job.summary, job.summary


def test_a_usage_error_stops_the_job_at_the_judge_step(tmp_path):
    runner = Runner(tmp_path)
    code, out = runner.run("judge", GAUNTLET_PYTEST_ARGS="--gauntlet-fail-on -1")
    assert code == 1 and "pytest exit status 4" in out and "--gauntlet-fail-on must be a percentage" in out, out
    assert not runner.path("GAUNTLET_RESULTS").exists()


SELFTEST = CHECKOUT / "examples" / "ci" / "gauntlet-selftest-gpu.yml"
# Offline, the checkout is installed as `gauntlet` from what the runner has (no index, no build isolation) first.
OFFLINE_INSTALL = 'python3 -m pip install -q --no-deps --no-build-isolation -e .'


@pytest.mark.parametrize(("env", "cores", "want"), [
    ({"GAUNTLET_OFFLINE": "1"}, 16, [OFFLINE_INSTALL, 'python3 -m pytest -n 14 --dist worksteal -m not serial',
                                     'python3 -m pytest -m serial']),
    ({"GAUNTLET_OFFLINE": "1", "GAUNTLET_WORKERS": "6"}, 16, [OFFLINE_INSTALL,
                                                              'python3 -m pytest -n 6 --dist worksteal -m not serial',
                                                              'python3 -m pytest -m serial']),
    ({}, 16, ['scripts/test.sh workers=14']),
    ({}, 2, ['scripts/test.sh workers=2']),
])
def test_the_selftest_workflow_runs_the_readme_s_suite(tmp_path, env, cores, want):
    """examples/ci/gauntlet-selftest-gpu.yml's step, run as GitHub runs it with python3, nproc and scripts/test.sh
    replaced by recorders: online it is the README's test command with workers two below the cores; offline it is the
    README's command for a runner without a package network, word for word."""
    workflow = yaml.safe_load(SELFTEST.read_text())
    assert SELFTEST.parent != CHECKOUT / ".github" / "workflows"
    (step,) = [s for s in workflow["jobs"]["tests"]["steps"] if "run" in s]
    assert "${{" not in step["run"]
    bin_, log = tmp_path / "bin", tmp_path / "calls.txt"
    bin_.mkdir()
    for name, body in (("python3", f'echo "python3 $*" >> {log}'), ("nproc", f"echo {cores}")):
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test.sh").write_text(f'echo "scripts/test.sh workers=$GAUNTLET_WORKERS" >> {log}\n')
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    settings = {k: str(v) for k, v in workflow["env"].items()}
    code, out = _run(["bash", "--noprofile", "--norc", "-eo", "pipefail", script], tmp_path,
                     {"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", **settings, **env}, timeout=60)
    assert code == 0, out
    assert log.read_text().splitlines() == want
    readme = (CHECKOUT / "README.md").read_text().replace("\n", " ")
    assert '`python -m pytest -n 14 --dist worksteal -m "not serial"` then `python -m pytest -m serial`' in readme
    assert "`python -m pip install --no-deps --no-build-isolation -e .`" in readme
