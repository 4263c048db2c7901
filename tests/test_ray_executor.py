"""`--executor ray` (gauntlet.executors.cluster) on a local Ray cluster that declares two logical GPUs: one
task per candidate, each on its own GPU (CUDA_VISIBLE_DEVICES set by Ray, down to the candidate's confined
worker); a task whose process is killed mid-judgement is retried and the candidate still has exactly one line; the
lines come back in the candidates' order into one file. One cluster for the module (starting one costs seconds)."""
import io
from pathlib import Path
import json
import os
import signal
import threading
import time

import pytest

ray = pytest.importorskip("ray")

from gauntlet import discover  # noqa: E402
from gauntlet.executors import many  # noqa: E402
from gauntlet.judge.evaluate import Options  # noqa: E402
from tests.test_executors import seen_device  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    # Two logical GPUs, whatever this machine has: a GPU runner's pytest-xdist pinning (CUDA_VISIBLE_DEVICES)
    # must not leak into the cluster's idea of its GPUs.
    pinned = os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    t0 = time.monotonic()
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    print(f"ray.init: {time.monotonic() - t0:.1f}s")
    from gauntlet.executors.cluster import RayExecutor
    yield RayExecutor()                     # finds the cluster started here, and leaves it running
    ray.shutdown()
    if pinned is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = pinned


def _judge(executor, tmp_path, files: dict) -> tuple[list[dict], Path]:
    folder = tmp_path / "cands"
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.py").write_text(text)
    out = tmp_path / "lines.jsonl"
    stdout = io.StringIO()
    run = many.Run(len(files), "cpu", gpus=executor.gpus, executor=executor.kind)
    many.judge_all(discover.get_problem("gemm"), many.collect([str(folder)]),
                   Options(device="cpu", dtypes=("float32",), examples=1, seed=1), many.Lines(stdout, out),
                   executor, run, ship_source=True)
    return [json.loads(x) for x in stdout.getvalue().splitlines()], out


def _worker_of(marker: str, timeout_s: float = 120.0) -> tuple[int, int]:
    """(pid, parent pid) of the confined worker of the candidate whose file name holds `marker`; its parent is the
    Ray worker process judging it (the task)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\0")
                with open(f"/proc/{pid}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"gauntlet.child.worker" in argv and any(marker.encode() in a for a in argv):
                return int(pid), ppid
        time.sleep(0.05)
    raise AssertionError(f"no worker of {marker} appeared")


def _cuda_visible(pid: int) -> str | None:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        env = dict(kv.split(b"=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
    value = env.get(b"CUDA_VISIBLE_DEVICES")
    return value.decode() if value is not None else None


def test_tasks_on_distinct_gpus_a_killed_one_retried_and_judged_once_a_crash_judged(cluster, tmp_path):
    """Two candidates, one task each, both waiting at import until the test has seen them run at once:
    - a_victim's task process (its judge) is then SIGKILLed, as a lost worker or node looks to Ray: Ray runs the
      task again on a fresh worker, and a_victim ends with one line, from the second judge;
    - b_crash then kills its own process: its judge survives, returns the verdict, and Ray retries nothing.
    The lines come back in the candidates' order (b finished first) into one file."""
    killed = tmp_path / "killed"
    wait = f"import os, time\nBACKEND = 'torch'\nwhile not os.path.exists({str(killed)!r}): time.sleep(0.05)\n"
    files = {"a_victim": wait + "raise RuntimeError('sees CUDA_VISIBLE_DEVICES=' + "
                                "os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))\n",
             "b_crash": wait + "import signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"}
    seen = {}

    def kill_a_running_judge():
        try:
            (a, judge_a), (b, _) = _worker_of("a_victim"), _worker_of("b_crash")
            seen["devices"] = {_cuda_visible(a), _cuda_visible(b)}        # both running now, each on its GPU
            seen["killed"] = judge_a
            os.kill(judge_a, signal.SIGKILL)
        finally:
            killed.write_text("")

    killer = threading.Thread(target=kill_a_running_judge, daemon=True)
    killer.start()
    lines, out = _judge(cluster, tmp_path, files)
    killer.join(5)
    assert seen["devices"] == {"0", "1"}                   # Ray set CUDA_VISIBLE_DEVICES, one GPU per task
    assert [d["id"] for d in lines] == ["a_victim", "b_crash"]
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a_victim", "b_crash"]   # once each
    a, b = lines
    assert a["judged_by"]["executor"] == "ray" and a["judged_by"]["pid"] != seen["killed"]     # the retry's judge
    assert seen_device(a) == a["judged_by"]["device"]      # the confined worker sees its task's GPU
    assert a["verdict"] == "error" and a["reasons"][0]["code"] == "import_error"
    assert b["verdict"] != "pass" and b["judged_by"]["executor"] == "ray"
    assert [r["code"] for r in b["reasons"]] in (["crash"], ["import_error"])
    assert "harness error" not in b["reasons"][0]["detail"] and "SIGSEGV" in b["reasons"][0]["detail"]
    assert all(d["path"].startswith(str(tmp_path)) for d in lines)         # the driver's name for each file
