"""The walls of earlier judgements (gauntlet.judge.records.walls): kept in the judge's cache folder, read back to
start a run's longest judgements first."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gauntlet.judge.records import walls

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GAUNTLET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_known_walls_order_the_run_and_the_others_are_scaled_by_their_stand_in():
    items = ["a", "b", "c", "d", "e"]
    stand_in = [8, 2, 2, 4, 2]                     # the stand-in would start a, then d
    known = [40.0, 130.0, None, None, 20.0]        # ... but b took 130 s and a 40 s last time
    # seconds per unit among the known: 5, 65, 10 -> median 10; so c reads 20 s and d 40 s
    assert walls.longest_first(items, stand_in, known) == ["b", "a", "d", "c", "e"]
    assert walls.longest_first(items, stand_in, [None] * 5) == ["a", "d", "b", "c", "e"]   # stable among equals


def test_walls_are_kept_by_key_and_options_without_the_seed(cache):
    k1 = walls.key("gemm/triton_tiled@cuda", {"examples": 30, "seed": 1, "peaks": {"x": 1}})
    assert k1 == walls.key("gemm/triton_tiled@cuda", {"examples": 30, "seed": 7})
    assert k1 != walls.key("gemm/triton_tiled@cuda", {"examples": 2, "seed": 1})
    assert walls.known() == {}
    walls.note({k1: 154.07})
    walls.note({"other": 3.0})
    assert walls.known() == {k1: 154.07, "other": 3.0}
    (cache / walls.NAME).write_text(json.dumps({k1: {"wall_s": "slow"}, "x": 1, "y": {"wall_s": -1}}))
    assert walls.known() == {}                     # what cannot be read is not known, never an error
    (cache / walls.NAME).write_text("not json")
    assert walls.known() == {}


def test_the_oldest_walls_are_forgotten_past_the_limit(cache, monkeypatch):
    monkeypatch.setattr(walls, "KEEP", 3)
    for i in range(5):
        monkeypatch.setattr(walls.time, "time", lambda i=i: 1000.0 + i)
        walls.note({f"k{i}": float(i)})
    assert walls.known() == {"k2": 2.0, "k3": 3.0, "k4": 4.0}


def test_a_run_keeps_its_walls_and_the_next_run_starts_the_longest_first(tmp_path):
    """Two runs of two gemm solutions on the CPU, one judge: the first keeps both walls in the judge's cache; with
    the walls rewritten so that the solution the plan puts last took longest, the second run starts it first."""
    env = dict(os.environ, GAUNTLET_CACHE=str(tmp_path / "cache"))
    args = [sys.executable, "-m", "gauntlet", "run", "--device", "cpu", "--problem", "gemm", "--solution",
            "cupy_sgemm_1_naive", "--solution", "torch_matmul", "--dtype", "float32", "--fresh",
            "--out", str(tmp_path / "results.json")]

    def started():
        done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode in (0, 1), done.stderr[-3000:]
        return re.findall(r"gemm/(\w+)@cpu: running", done.stderr)

    assert started() == ["cupy_sgemm_1_naive", "torch_matmul"]       # no walls: the plan's order among equals
    kept = json.loads((tmp_path / "cache" / walls.NAME).read_text())
    assert sorted(k.split(" ")[0] for k in kept) == ["gemm/cupy_sgemm_1_naive@cpu", "gemm/torch_matmul@cpu"]
    for k, entry in kept.items():
        entry["wall_s"] = 1000.0 if "torch_matmul" in k else 1.0
    (tmp_path / "cache" / walls.NAME).write_text(json.dumps(kept))
    assert started() == ["torch_matmul", "cupy_sgemm_1_naive"]
