"""A run killed mid-way leaves a complete, valid results file, and running it again resumes instead of redoing."""
import json
import os
import signal
import subprocess
import sys
import time
from tests import needs


def _run(out, *extra, **kw):
    cmd = [sys.executable, "-m", "gauntlet", "run", "--problem", "gemm", "--solution", "torch_matmul",
           "--solution", "triton_tiled", "--device", "cpu", "--examples", "2", "--dtype", "float32",
           "--out", str(out), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kw)


@needs.triton_cpu
def test_killed_run_leaves_valid_file_and_resumes(tmp_path):
    out = tmp_path / "results.json"
    proc = _run(out)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if out.exists() and json.loads(out.read_text())["records"]:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)        # the whole run, children included, mid-way
    proc.wait()
    doc = json.loads(out.read_text())          # valid JSON, not a half-written file
    assert doc["schema"] == "gauntlet.run/1"
    done = {r["solution"] for r in doc["records"]}
    assert done and all(r["verdict"] == "pass" for r in doc["records"])

    again = _run(out)
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert "(resumed)" in err and "re-judged 0" in err
    final = json.loads(out.read_text())
    assert {r["solution"] for r in final["records"]} == {"torch_matmul", "triton_tiled"}
