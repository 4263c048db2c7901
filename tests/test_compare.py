"""`gauntlet compare` (gauntlet.reports.compare), the regression gate. The records in tests/data are real: three
separate judgements of gemm/triton_tiled (bf16, 4096^3) in one session on an H100 (80 GB HBM3), the same code each time;
the slowdown and the failure are planted into copies of them."""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gauntlet.reports import compare

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
REAL = [DATA / f"h100_triton_tiled_{i}.json" for i in (1, 2, 3)]


def _record(i: int) -> dict:
    return json.loads(REAL[i].read_text())


def _write(tmp_path, name: str, doc) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if isinstance(doc, dict) else "\n".join(json.dumps(d) for d in doc) + "\n")
    return path


def _slowed(record: dict, factor: float) -> dict:
    out = copy.deepcopy(record)
    for t in out["timings"]:
        t["candidate_ms"] *= factor
        for side in t["baselines"].values():
            side["speedup"] /= factor
            side["ci95"] = [x / factor for x in side["ci95"]]
    return out


def _cli(*argv):
    out = subprocess.run([sys.executable, "-m", "gauntlet", "compare", *map(str, argv)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    return out.returncode, out.stdout, out.stderr


@pytest.mark.parametrize(("a", "b"), [(0, 1), (0, 2), (1, 2), (2, 0)])
def test_two_runs_of_the_same_code_are_quiet(a, b):
    doc = compare.compare(compare.load(REAL[a]), compare.load(REAL[b]))
    assert not doc["regressions"] and not doc["incomparable"] and len(doc["rows"]) == 1
    row = doc["rows"][0]
    assert abs(row["change_pct"]) < 1 and row["ci95_pct"][0] < 0 < row["ci95_pct"][1], row


def test_a_planted_ten_percent_slowdown_is_flagged_and_fails_the_gate(tmp_path):
    slow = _write(tmp_path, "slow.json", _slowed(_record(1), 1.10))
    code, out, err = _cli(REAL[0], slow, "--json")
    assert code == 1, err
    doc = json.loads(out)
    (reg,) = doc["regressions"]
    assert reg["kind"] == "slower" and 9 < reg["change_pct"] < 11 and reg["ci95_pct"][0] > 5
    code, out, _ = _cli(REAL[0], slow, "--fail-on", "15")
    assert code == 0 and "**0 regression(s)**" in out and "+10." in out
    code, out, _ = _cli(slow, REAL[0])             # the other way round it is faster, never a regression
    assert code == 0 and "| faster |" in out


def test_a_pass_that_fails_now_always_fails_the_gate(tmp_path):
    broken = _record(1)
    broken.update(verdict="fail", timings=[], reasons=[{"code": "mismatch", "detail": "<b>x</b> | y", "repro": ""}])
    md = tmp_path / "comment.md"
    code, out, err = _cli(REAL[0], _write(tmp_path, "broken.json", broken), "--fail-on", "50", "--markdown", md)
    assert code == 1, err
    assert "Verdicts that were pass" in out and "| fail | mismatch |" in out and md.read_text().strip() == out.strip()


def test_another_gpu_or_other_settings_are_not_compared(tmp_path):
    other_gpu = _record(1)
    other_gpu["environment"]["gpu"] = "NVIDIA H200"
    doc = compare.compare(compare.load(REAL[0]), compare.load(_write(tmp_path, "h200.json", _slowed(other_gpu, 1.5))))
    assert not doc["regressions"] and not doc["rows"] and "different GPUs" in doc["incomparable"][0]["why"]
    more = _slowed(_record(1), 1.5)
    more["fingerprint"]["options"]["examples"] = 30
    more["fingerprint"]["options"]["seed"] = 99            # a different seed alone is not a different setting
    doc = compare.compare(compare.load(REAL[0]), compare.load(_write(tmp_path, "more.json", more)))
    assert doc["incomparable"][0]["why"] == "different settings: examples"


def test_results_files_and_eval_many_lines_are_read_too(tmp_path):
    base, new = _record(0), _slowed(_record(1), 1.2)
    run = {"schema": "gauntlet.run/1", "environment": base["environment"], "records": [base]}
    lines = [dict(new, schema="gauntlet.many/1", id="triton_tiled", index=0),
             {"schema": "gauntlet.many/1", "summary": {"environment": new["environment"]}}]
    doc = compare.compare(compare.load(_write(tmp_path, "results.json", run)),
                          compare.load(_write(tmp_path, "lines.jsonl", lines)))
    assert [r["kind"] for r in doc["regressions"]] == ["slower"]


def test_hostile_names_stay_inside_their_cell_and_bad_input_is_the_users_error(tmp_path):
    rec = _record(0)
    rec["solution"] = "x|<script>`"
    text = compare.markdown(compare.compare(compare.load(_write(tmp_path, "a.json", rec)),
                                            compare.load(_write(tmp_path, "b.json", rec))), ("a", "b"))
    assert "<script>" not in text and "x\\|&lt;script&gt;'" in text
    code, _, err = _cli(tmp_path / "nope.json", REAL[0])
    assert code == 2 and "cannot be read" in err
    code, _, err = _cli(_write(tmp_path, "other.json", {"schema": "something/9"}), REAL[0])
    assert code == 2 and "schema" in err


def test_a_host_bound_figure_is_said_to_be_one_and_still_gates(tmp_path):
    """A candidate whose every timed call waited for its host (grouped_gemm_moe's loop of cuBLAS calls judged as a
    candidate) reads the host's speed: with eight judges on a two-GPU host it read 17% slower than with four. The row
    says so, and the slowdown still fails the gate (a real one looks the same); a GPU-bound row says nothing."""
    host_bound = _slowed(_record(1), 1.17)
    for t in host_bound["timings"]:
        t["starved_calls"] = [200, 200]
    code, out, err = _cli(REAL[0], _write(tmp_path, "loop.json", host_bound), "--json")
    assert code == 1, err
    (row,) = json.loads(out)["rows"]
    assert row["host_bound"] and row["slower"]
    code, out, _ = _cli(REAL[0], _write(tmp_path, "loop.json", host_bound))
    assert "**slower** (host-bound)" in out and "reads the host's speed" in out
    doc = compare.compare(compare.load(REAL[0]), compare.load(REAL[1]))
    assert [r["host_bound"] for r in doc["rows"]] == [False]
    partly = _record(1)
    for t in partly["timings"]:
        t["starved_calls"] = [3, 200]                   # a few calls starved: not host-bound
    doc = compare.compare(compare.load(REAL[0]), compare.load(_write(tmp_path, "partly.json", partly)))
    assert [r["host_bound"] for r in doc["rows"]] == [False]
