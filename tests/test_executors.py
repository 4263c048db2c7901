"""Every GPU of one host (`--gpus N|all`, gauntlet.executors.local and slots): one judge process per GPU,
each seeing only its own (CUDA_VISIBLE_DEVICES, down to the candidate's confined worker), judging at the same
time as the others, with the lines and the results file in the candidates' order whatever finishes first. On the
CPU the GPUs are logical slots, which is what CI can check."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gauntlet import executors
from gauntlet.executors import slots

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--device", "cpu", "--dtype", "float32", "--examples", "1", "--seed", "1"]


def says_its_device(seconds: float) -> str:
    """A candidate that takes `seconds` to import and then fails, naming the GPU its own process was given: the
    import error carries what the confined worker saw."""
    return ("import os, time\nBACKEND = 'torch'\ntime.sleep(%s)\n"
            "raise RuntimeError('sees CUDA_VISIBLE_DEVICES=' + os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))\n"
            % seconds)


def seen_device(record: dict) -> str:
    (reason,) = record["reasons"]
    return reason["detail"].rsplit("sees CUDA_VISIBLE_DEVICES=", 1)[1].split()[0]


def _gauntlet(*argv, env=None):
    out = subprocess.run([sys.executable, "-m", "gauntlet", *argv], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, env=env)
    return out.returncode, out.stdout, out.stderr


@pytest.mark.parametrize("spec,device,environ,count,want", [
    ("2", "cpu", {}, 0, ["0", "1"]),
    ("all", "cpu", {"GAUNTLET_LOGICAL_GPUS": "3"}, 0, ["0", "1", "2"]),
    ("all", "cuda", {}, 4, ["0", "1", "2", "3"]),
    ("2", "cuda", {"CUDA_VISIBLE_DEVICES": "5,2,7"}, 3, ["5", "2"]),
    ("all", "cuda", {"CUDA_VISIBLE_DEVICES": "5,2"}, 2, ["5", "2"]),
])
def test_which_gpu_each_slot_gets(spec, device, environ, count, want):
    assert slots.slot_devices(spec, device, environ, lambda: count) == want


@pytest.mark.parametrize("spec,device,environ,count,match", [
    ("all", "cpu", {}, 0, "GAUNTLET_LOGICAL_GPUS"),
    ("all", "cpu", {"GAUNTLET_LOGICAL_GPUS": "zero"}, 0, "positive number of logical GPUs"),
    ("3", "cuda", {}, 2, "only 2 GPU"),
    ("0", "cpu", {}, 0, "positive number or 'all'"),
    ("all", "cuda", {"CUDA_VISIBLE_DEVICES": ""}, 0, "no CUDA device is visible"),
])
def test_gpus_the_host_does_not_have_are_the_users_error(spec, device, environ, count, match):
    with pytest.raises(ValueError, match=match):
        slots.slot_devices(spec, device, environ, lambda: count)


def test_the_plugin_and_gpus_share_one_rule():
    """pytest-xdist worker gwI and slot I get the same GPU from the same devices."""
    from gauntlet.plugin import pin_xdist_worker
    for i in range(5):
        environ = {"PYTEST_XDIST_WORKER": f"gw{i}", "CUDA_VISIBLE_DEVICES": "3,1"}
        pin_xdist_worker(environ, lambda: 0)
        assert environ["CUDA_VISIBLE_DEVICES"] == slots.slot_device(i, ["3", "1"])


def test_executor_choice_and_its_usage_errors():
    assert executors.make("local", "cpu").kind == "inline"
    assert executors.make("local", "cpu", "2").devices == ["0", "1"]
    with pytest.raises(ValueError, match="--address is for --executor ray"):
        executors.make("local", "cpu", None, "10.0.0.1:6379")
    code, out, err = _gauntlet("eval-many", "gemm", str(ROOT / "solutions" / "gemm" / "torch_matmul.py"), *FLAGS,
                               "--gpus", "all")
    assert code == 2 and "GAUNTLET_LOGICAL_GPUS" in err, err


def test_eval_many_on_two_logical_gpus_judges_at_once_each_on_its_own_and_keeps_the_order(tmp_path):
    """a takes longer than b: b finishes first, its line still comes second, in stdout and in the file."""
    folder = tmp_path / "cands"
    folder.mkdir()
    (folder / "a_slow.py").write_text(says_its_device(5))
    (folder / "b_fast.py").write_text(says_its_device(0.5))
    out = tmp_path / "lines.jsonl"
    code, stdout, err = _gauntlet("eval-many", "gemm", str(folder), *FLAGS, "--gpus", "2", "--out", str(out))
    assert code == 0, err
    *lines, summary = [json.loads(line) for line in stdout.splitlines()]
    assert [d["id"] for d in lines] == ["a_slow", "b_fast"]
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()[:2]] == ["a_slow", "b_fast"]
    where = [d["judged_by"] for d in lines]
    assert {w["executor"] for w in where} == {"local"}
    assert sorted(w["device"] for w in where) == ["0", "1"] and where[0]["pid"] != where[1]["pid"]
    # Each judge's environment named its GPU, and the candidate's confined worker saw that one.
    assert [seen_device(d) for d in lines] == [w["device"] for w in where]
    # At the same time: each began before the other ended; and b did end first.
    ends = [w["started_at"] + d["wall_s"] for w, d in zip(where, lines)]
    assert where[0]["started_at"] < ends[1] and where[1]["started_at"] < ends[0]
    assert ends[1] < ends[0]
    assert summary["summary"]["gpus"] == 2 and summary["summary"]["executor"] == "local"
    assert "on GPU" in err


def test_run_on_two_logical_gpus_writes_the_plan_order(tmp_path):
    sols = tmp_path / "solutions" / "gemm"
    sols.mkdir(parents=True)
    (sols / "a_slow.py").write_text(says_its_device(3))
    (sols / "b_fast.py").write_text("def solve(a, b):\n    return a @ b\n")     # no BACKEND: refused at once
    out = tmp_path / "results.json"
    code, _, err = _gauntlet("run", "--problem", "gemm", "--solutions", str(tmp_path / "solutions"),
                             "--solution", "a_slow", "--solution", "b_fast", *FLAGS, "--gpus", "2",
                             "--out", str(out))
    assert code == 1, err                     # both fail to import: a failing run
    records = json.loads(out.read_text())["records"]
    assert [r["solution"] for r in records] == ["a_slow", "b_fast"]
    assert seen_device(records[0]) in ("0", "1") and records[1]["reasons"][0]["code"] == "import_error"
    assert err.index("b_fast@cpu: error") < err.index("a_slow@cpu: error")      # b finished first all the same


def test_a_slot_finds_the_package_that_started_it(tmp_path):
    """A slot is started with -P (its cwd not on the path) from wherever the user is: it imports the very
    `gauntlet` package this process runs (a checkout through its editable install, or site-packages)."""
    import gauntlet
    done = subprocess.run([sys.executable, "-P", "-c", "import gauntlet; print(gauntlet.__file__)"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == Path(gauntlet.__file__).resolve()


def test_a_slot_that_dies_costs_its_job_an_error_that_blames_the_harness(tmp_path):
    """Not the candidate's verdict: the judge itself went away (here: killed); a fresh slot takes the GPU."""
    import os
    import signal
    import threading
    import time

    from gauntlet import discover
    from gauntlet.judge.evaluate import Options
    from gauntlet.executors import task
    from gauntlet.executors.local import LocalExecutor
    path = tmp_path / "waits.py"
    path.write_text(says_its_device(30))
    problem = discover.get_problem("gemm")
    job = task.make_job(0, problem, discover.get_solution("gemm", str(path)), Options(device="cpu", examples=1))
    ex = LocalExecutor(["0"])

    def kill_when_judging(job, where):
        def later():
            time.sleep(1)
            os.kill(ex.slots[0].proc.pid, signal.SIGKILL)
        threading.Thread(target=later, daemon=True).start()

    try:
        ((_, result),) = list(ex.run([job], on_start=kill_when_judging))
        assert result["record"]["verdict"] == "error"
        assert "judge slot of GPU 0 died" in result["record"]["reasons"][0]["detail"]
        assert ex.slots[0].proc.poll() is None          # replaced
        assert result["wall_s"] >= 1.0                  # eval-many's line needs it (a KeyError there on an H100)
    finally:
        ex.close()


def test_a_judgement_that_fails_hands_its_gpu_memory_back(monkeypatch, tmp_path):
    """A harness error mid-judgement leaves what its frames held in the allocator's cache (47 GB on an H100, and
    the next judge's timed shape on that card could not build its inputs): the job's process hands it back before
    its result goes out, whether the judgement ended well or not."""
    import torch

    from gauntlet import discover
    from gauntlet.judge import evaluate as evaluate_module
    from gauntlet.judge.evaluate import Options
    from gauntlet.executors import task
    freed = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: freed.append("empty_cache"))

    def fails(problem, solution, opts):
        held = torch.zeros(4)              # a frame's tensor, alive in the traceback while the error is recorded
        raise RuntimeError(f"out of memory with {held.numel()} held")

    monkeypatch.setattr(evaluate_module, "evaluate", fails)
    path = tmp_path / "fine.py"
    path.write_text("BACKEND = 'torch'\nimport torch\ndef solve(a, b):\n    return a @ b\n")
    problem = discover.get_problem("gemm")
    job = task.make_job(0, problem, discover.get_solution("gemm", str(path)),
                        Options(device="cpu", examples=1, timing=False))
    result = task.judge(job, where={"executor": "local", "slot": 0})
    assert result["record"]["verdict"] == "error" and "out of memory with 4 held" in str(result["record"])
    assert freed == ["empty_cache"]
