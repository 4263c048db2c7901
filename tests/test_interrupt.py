"""A stopped run keeps its work (issue 23): SIGINT (Ctrl-C, to the whole process group) and SIGTERM (a CI cancel, to
the judge alone) end `gauntlet run` and `gauntlet eval --json` cleanly, a second signal ends them at once, and a
judge killed with SIGKILL leaves a results file that loads and resumes. Every test starts a real judge on the CPU
and counts the processes of the run that are left afterwards: there must be none.

The selection is three solutions of gemm in a folder of the test's own: `a_quick` (judged in seconds), `b_stuck`
(sleeps in solve(), after forking a grandchild that leaves its session, so it is in flight when the signal comes
and has started something the judge must stop too) and `c_later` (never reached).
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests import needs

QUICK = """
import torch
BACKEND = "torch"
def solve(a, b):
    return torch.matmul(a, b)
"""
STUCK = """
import os, time, torch
BACKEND = "torch"
def solve(a, b):
    if os.environ.get("STUCK_FORKS") and os.fork() == 0:   # a grandchild outside the worker's session
        os.setsid()
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    time.sleep(600)
    return torch.matmul(a, b)
"""
WAIT_S = 120


@pytest.fixture
def suite(tmp_path):
    folder = tmp_path / "solutions" / "gemm"
    folder.mkdir(parents=True)
    for name, text in (("a_quick", QUICK), ("b_stuck", STUCK), ("c_later", QUICK)):
        (folder / f"{name}.py").write_text(textwrap.dedent(text))
    yield tmp_path
    _kill_leftovers(tmp_path)


def _argv(tmp_path, *names):
    names = names or ("a_quick", "b_stuck", "c_later")
    return ["run", "--problem", "gemm", "--solutions", str(tmp_path / "solutions"),
            *[a for n in names for a in ("--solution", n)], "--device", "cpu", "--dtype", "float32",
            "--out", str(tmp_path / "results.json"), "--report", str(tmp_path / "report")]


def _start(argv, forks=True, cache=None):
    """`cache`: a judge's cache folder of the test's own. `run` starts the judgements with the longest walls kept
    there first (gauntlet.judge.records.walls), and these tests need the plan's order (a_quick, b_stuck, c_later),
    which walls that other tests' runs of the same names left in a shared folder would change."""
    env = dict(os.environ, STUCK_FORKS="1" if forks else "")
    if cache is not None:
        env["GAUNTLET_CACHE"] = str(cache)
    return subprocess.Popen([sys.executable, "-m", "gauntlet", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=env, preexec_fn=needs.ctrl_c_default)


def _processes(tmp_path, word=""):
    """Live processes of this test's run: their command line names its folder (the judge's --out, a worker's
    solution file, which a forked grandchild inherits)."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(tmp_path) in cmd and word in cmd and state != "Z":
            out.append(int(pid))
    return out


def _kill_leftovers(tmp_path):
    for pid in _processes(tmp_path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_in_flight(proc, tmp_path, forks=True):
    """Until a_quick's record is in the results file and b_stuck is in solve() (with its grandchild, if it
    forks)."""
    out, deadline = tmp_path / "results.json", time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            recorded = bool(json.loads(out.read_text())["records"])
        except (OSError, ValueError):
            recorded = False
        if recorded and len(_processes(tmp_path, "b_stuck")) >= (2 if forks else 1):
            time.sleep(0.3)       # b_stuck's first call is running
            return
        time.sleep(0.1)
    raise AssertionError("the run never reached b_stuck")


def _no_survivors(tmp_path):
    left = _processes(tmp_path)
    assert not left, f"processes of the run outlived it: {left}"


@pytest.mark.parametrize("signum, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False)],
                         ids=["sigint-to-group", "sigterm-to-judge"])
def test_signal_ends_run_cleanly(suite, signum, to_group):
    argv = _argv(suite)
    proc = _start(argv, cache=suite / "cache")
    _wait_in_flight(proc, suite)
    t0 = time.monotonic()
    (os.killpg if to_group else os.kill)(proc.pid, signum)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 30, "stopping took too long"
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    _no_survivors(suite)

    doc = json.loads((suite / "results.json").read_text())
    assert [r["solution"] for r in doc["records"]] == ["a_quick"]
    assert doc["records"][0]["verdict"] == "pass"
    name = signal.Signals(signum).name
    mark = doc["interrupted"]
    assert mark["signal"] == name and mark["in_flight"] == "gemm/b_stuck@cpu" and mark["judged"] == 1
    assert mark["not_judged"] == ["gemm/b_stuck@cpu", "gemm/c_later@cpu"]

    report = (suite / "report" / "leaderboard.md").read_text()
    assert "a_quick" in report and f"stopped by {name}" in report and "b_stuck" not in report.split("## Leader")[1]
    assert (suite / "report" / "leaderboard.html").exists()

    line = err.strip().splitlines()[-1]
    assert line.startswith(f"gauntlet: stopped by {name}: 1 of 3 judged (0 resumed, 0 re-judged, 1 new), "
                           f"gemm/b_stuck@cpu abandoned mid-judgement; 2 not judged"), line
    resume = line.split("resume with: ", 1)[1]
    # Started as `python -m gauntlet`, so resumed the same way: the line runs as printed, whatever is on PATH.
    assert shlex.split(resume) == [sys.executable, "-m", "gauntlet", *argv] and mark["resume"] == resume

    if signum == signal.SIGTERM:
        # The command the line gives resumes: with b_stuck fixed, the rest is judged and the mark goes.
        (suite / "solutions" / "gemm" / "b_stuck.py").write_text(textwrap.dedent(QUICK))
        again = subprocess.run(shlex.split(resume), capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, GAUNTLET_CACHE=str(suite / "cache")))
        assert again.returncode == 0, again.stderr
        assert "gemm/a_quick@cpu: unchanged since it was judged: pass (resumed)" in again.stderr
        final = json.loads((suite / "results.json").read_text())
        assert sorted(r["solution"] for r in final["records"]) == ["a_quick", "b_stuck", "c_later"]
        assert "interrupted" not in final


def test_second_signal_ends_at_once(suite):
    """Ctrl-C, then a CI's SIGTERM right behind it: whichever ends the run, it ends without a traceback or a
    survivor, and the results file holds what was judged."""
    proc = _start(_argv(suite), cache=suite / "cache")
    _wait_in_flight(proc, suite)
    os.killpg(proc.pid, signal.SIGINT)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (130, 143), err
    assert "Traceback" not in err, err
    if proc.returncode == 143:
        assert "SIGTERM again while stopping: stopped at once" in err
        assert err.strip().splitlines()[-1].startswith("gauntlet: what was judged is kept in ")
    _no_survivors(suite)
    doc = json.loads((suite / "results.json").read_text())
    assert [r["solution"] for r in doc["records"]] == ["a_quick"]


HANGS = """
import subprocess, sys, time
from gauntlet.judge.records import interrupt
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{tag}"], start_new_session=True)
    print(p.pid, flush=True)
with interrupt.handle(lambda: print("last words", flush=True)):
    try:
        sleeper()              # inside the try: the test's first signal may come before the sleep below begins
        time.sleep(600)
    except interrupt.Interrupted:
        sleeper()              # started while stopping
        time.sleep(600)        # a shutdown that hangs
"""


def test_second_signal_cuts_a_hanging_shutdown_short(tmp_path):
    """The mechanism alone, made deterministic: the first signal stops what was started, the second ends a
    shutdown that hangs, after its last words (once) and with what the shutdown started stopped too."""
    proc = subprocess.Popen([sys.executable, "-c", HANGS.format(tag=tmp_path)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=needs.ctrl_c_default)
    first = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGINT)
    second = int(proc.stdout.readline())
    assert not _alive(first)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=20) == 143
    assert proc.stdout.read() == "last words\n"
    assert not _alive(second)
    _kill_leftovers(tmp_path)


def _alive(pid):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
        except OSError:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_eval_json_prints_one_interrupted_object(suite, signum):
    stuck = suite / "solutions" / "gemm" / "b_stuck.py"
    proc = _start(["eval", "gemm", str(stuck), "--device", "cpu", "--dtype", "float32", "--json"])
    deadline = time.monotonic() + WAIT_S
    while len(_processes(suite, "b_stuck")) < 3 and time.monotonic() < deadline:    # judge, worker, grandchild
        assert proc.poll() is None
        time.sleep(0.1)
    (os.killpg if signum == signal.SIGINT else os.kill)(proc.pid, signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    lines = out.splitlines()
    assert len(lines) == 1, out
    doc = json.loads(lines[0])
    assert doc["verdict"] == "interrupted" and doc["solution"] == "b_stuck"
    assert [r["code"] for r in doc["reasons"]] == ["interrupted"]
    _no_survivors(suite)


def test_sigkill_between_records_leaves_a_file_that_resumes(suite):
    """kill -9 of the judge alone (the OOM killer, a runner torn down): its workers die with it (PDEATHSIG), the
    file holds the judged record, and the next run resumes it."""
    proc = _start(_argv(suite), forks=False, cache=suite / "cache")
    _wait_in_flight(proc, suite, forks=False)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while _processes(suite) and time.monotonic() < deadline:
        time.sleep(0.1)
    _no_survivors(suite)
    doc = json.loads((suite / "results.json").read_text())
    assert [r["solution"] for r in doc["records"]] == ["a_quick"]
    again = subprocess.run([sys.executable, "-m", "gauntlet", *_argv(suite, "a_quick")], capture_output=True,
                           text=True, timeout=300, env=dict(os.environ, GAUNTLET_CACHE=str(suite / "cache")))
    assert again.returncode == 0, again.stderr
    assert "(resumed)" in again.stderr and "new 0" in again.stderr


MID_WRITE = """
import os, signal, sys
from pathlib import Path
from gauntlet.judge.records import results
from gauntlet.judge.records.results import EvalRecord, ResultsFile
out, where = Path(sys.argv[1]), sys.argv[2]
rf = ResultsFile(out, {"device": "cpu"})
rf.add(EvalRecord("gemm", "first", "first.py", "torch", "cpu"))
die = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
if where == "writing":             # half of the new document is on disk
    def half(self, text, *a, **k):
        with open(self, "w") as fh:
            fh.write(text[: len(text) // 2])
            fh.flush()
        die()
    Path.write_text = half
else:                              # all of it is, not yet renamed into place
    results.os.replace = die
rf.add(EvalRecord("gemm", "second", "second.py", "torch", "cpu"))
"""


@pytest.mark.parametrize("where", ["writing", "renaming"])
def test_sigkill_mid_write_leaves_the_previous_file(tmp_path, where):
    from gauntlet.judge.records.results import EvalRecord, ResultsFile, load
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-c", MID_WRITE, str(out), where], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (tmp_path / "results.json.tmp").exists()          # the kill did land mid-write
    assert [r["solution"] for r in load(out)["records"]] == ["first"]
    resumed = ResultsFile(out, {"device": "cpu"})
    assert resumed.previous("gemm/first@cpu") is not None
    resumed.add(EvalRecord("gemm", "second", "second.py", "torch", "cpu"))
    assert [r["solution"] for r in load(out)["records"]] == ["first", "second"]
    assert not (tmp_path / "results.json.tmp").exists()


def test_pytest_plugin_lets_pytest_report_the_interrupt(suite):
    """Ctrl-C during a judgement collected by the plugin: pytest's own interrupt summary, its exit status 2, and
    the worker (and what it forked) gone."""
    env = needs.plugin_env(dict(os.environ, STUCK_FORKS="1", GAUNTLET_SOLUTIONS=str(suite / "solutions")))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                             "--gauntlet-device", "cpu", str(suite / "solutions" / "gemm" / "b_stuck.py"),
                             "-k", "float32"], cwd=suite, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=needs.ctrl_c_default)
    deadline = time.monotonic() + WAIT_S
    while len(_processes(suite, "b_stuck")) < 3 and time.monotonic() < deadline:   # pytest, worker, grandchild
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert "!! KeyboardInterrupt !!" in out and "Traceback" not in out, out
    _no_survivors(suite)


def test_the_resume_command_is_the_one_that_was_started(tmp_path, monkeypatch):
    """The resume line runs as typed: `gauntlet` where that name on PATH is the script that ran, else the script's
    own path (a checkout's .venv/bin/gauntlet, its venv not activated), else `<python> -m gauntlet`; --fresh goes."""
    from gauntlet.judge.records import stopped
    script = tmp_path / "venv" / "bin" / "gauntlet"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    argv = ["run", "--out", "my results.json", "--fresh"]
    assert stopped.resume_command(argv, stopped.invoked_as("venv/bin/gauntlet")) == \
        f"{script} run --out 'my results.json'"
    monkeypatch.setenv("PATH", str(script.parent))
    assert stopped.invoked_as("venv/bin/gauntlet") == ["gauntlet"]
    assert stopped.invoked_as(str(tmp_path / "harness" / "__main__.py"), "/usr/bin/python3") == \
        ["/usr/bin/python3", "-m", "gauntlet"]
    assert stopped.invoked_as("/usr/bin/pytest", "/py") == ["/py", "-m", "gauntlet"]   # the CLI run in-process
