"""The leaderboard report: files written, ranking, failure reasons, escaping of hostile details, bad input."""
from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path

import pytest

from reports import leaderboard
from reports.leaderboard import build, markdown_table

INJECTION = "<script>alert(1)</script>"


def _timing(dtype, shape, speedup, tflops, base="cublas"):
    return {"dtype": dtype, "shape": shape, "source": "synthetic", "candidate_ms": 0.2, "candidate_wall_ms": 0.25,
            "mode": "graph", "reps": 50, "tflops": tflops, "gbps": 100.0, "peak_fraction": tflops / 800,
            "bw_fraction": 0.05, "spot_check": "pass",
            "baselines": {base: {"ms": 0.2 * speedup, "speedup": speedup, "ci95": [speedup - 0.02, speedup + 0.02],
                                 "tflops": 700.0}}}


def _record(problem, solution, verdict="pass", speedups=(), reasons=(), backend="triton", device="cuda",
            dtype="bfloat16", base="cublas"):
    shapes = [{"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 14336, "K": 4096}]
    timings = [_timing(dtype, s, x, 500.0 * x, base) for s, x in zip(shapes, speedups)]
    score = {}
    if timings:
        g = (speedups[0] * speedups[1]) ** 0.5 if len(speedups) == 2 else speedups[0]
        score = {dtype: {base: {"geomean_speedup": g, "fast_1.0": sum(x >= 1 for x in speedups) / len(speedups),
                                "fast_1.5": sum(x >= 1.5 for x in speedups) / len(speedups),
                                "shapes": len(speedups)}}}
    cases = {} if verdict == "unsupported" else {dtype: {"examples": 30, "calls": 90,
                                                         "status": "pass" if verdict == "pass" else verdict}}
    return {"schema": "gauntlet.eval/1", "problem": problem, "solution": solution, "path": f"solutions/{solution}.py",
            "backend": backend, "device": device, "verdict": verdict, "reasons": list(reasons), "cases": cases,
            "skipped": {"float32": "not in the solution's DTYPES"}, "timings": timings, "score": score,
            "seed": 123, "elapsed_s": 1.0}


def _doc(records, gpu="NVIDIA H100 80GB HBM3", device="cuda"):
    return {"schema": "gauntlet.run/1", "created": "2025-01-01T00:00:00+00:00", "updated": "2025-01-01T01:00:00+00:00",
            "environment": {"gpu": gpu, "device": device, "sm_count": 132, "torch": "2.9.0", "triton": "3.5.0",
                            "cupy": None, "cutlass_dsl": "4.2.0", "git_commit": "0123456789abcdef-dirty", "host": "h"},
            "peaks": {"bfloat16": {"tflops": 790.1}, "copy_gbps": 3000.0} if device == "cuda" else {},
            "records": records}


@pytest.fixture
def gpu_doc():
    return _doc([
        _record("gemm", "slow_tiled", speedups=(0.5, 0.7)),
        _record("gemm", "fast_tiled", speedups=(1.6, 1.2)),
        _record("gemm", "mid_tiled", speedups=(0.9, 1.1)),
        _record("gemm", "broken", verdict="fail", reasons=[
            {"code": "mismatch", "detail": f"max error 3.2 at (0, 1) {INJECTION}" + "x" * 1000,
             "repro": "gauntlet eval gemm broken --case M=3,N=5,K=7,seed=1"}]),
        _record("gemm", "cupy_raw", verdict="unsupported", backend="cupy",
                reasons=[{"code": "unsupported", "detail": "cupy is not installed", "repro": ""}]),
        _record("softmax", "online", speedups=(1.3,), base="torch"),
        _record("softmax", "crashy", verdict="error",
                reasons=[{"code": "crash", "detail": "RuntimeError: boom", "repro": "gauntlet eval softmax crashy"}]),
    ])


def _write(tmp_path, doc, name="run.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _board(md: str, title_part: str) -> list[str]:
    """Solution names, in order, of the leaderboard table whose heading contains title_part."""
    section = md.split(title_part, 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    return [line.split("|")[2].strip() for line in rows if not set(line) <= set("|-: ")]


def test_files_written(tmp_path, gpu_doc):
    result = build([_write(tmp_path, gpu_doc)], tmp_path / "out")
    assert result["markdown"] == tmp_path / "out" / "leaderboard.md" and result["markdown"].is_file()
    assert result["html"] == tmp_path / "out" / "leaderboard.html" and result["html"].is_file()
    assert result["rows"] == 7
    md = result["markdown"].read_text()
    assert "NVIDIA H100 80GB HBM3" in md and "commit 0123456789ab-dirty" in md and "bfloat16 790.1 TFLOP/s" in md
    assert "4096x4096x4096" in md and "1.60× [1.58, 1.62]" in md
    page = result["html"].read_text()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page and "http" not in page.split("<body>")[1]


def test_rows_ranked_by_speedup(tmp_path, gpu_doc):
    md = build([_write(tmp_path, gpu_doc)], tmp_path / "out")["markdown"].read_text()
    assert _board(md, "gemm · bfloat16") == ["fast_tiled", "mid_tiled", "slow_tiled", "broken", "cupy_raw"]
    assert _board(md, "softmax · bfloat16") == ["online", "crashy"]
    assert "vs cublas" in md and "vs torch" in md


def test_failures_carry_reason_code(tmp_path, gpu_doc):
    out = build([_write(tmp_path, gpu_doc)], tmp_path / "out")
    md = out["markdown"].read_text()
    broken_row = next(line for line in md.splitlines() if line.startswith("| ") and "| broken |" in line)
    assert "fail (mismatch)" in broken_row
    assert "error (crash)" in md and "unsupported (unsupported)" in md
    assert "## Failures" in md and "gauntlet eval gemm broken --case M=3,N=5,K=7,seed=1" in md
    assert "more characters]" in md and "x" * 400 not in md          # detail truncated
    assert "fail (mismatch)" in markdown_table([gpu_doc])


def test_html_escapes_untrusted_detail(tmp_path, gpu_doc):
    gpu_doc["records"][3]["solution"] = "evil<img src=x onerror=alert(1)>"
    page = build([_write(tmp_path, gpu_doc)], tmp_path / "out")["html"].read_text()
    assert INJECTION not in page and "<script" not in page.lower() and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert re.search(r'class="[^"]*v-fail[^"]*"', page) and "Content-Security-Policy" in page
    md = (tmp_path / "out" / "leaderboard.md").read_text()
    assert "<img" not in md                                        # table cells escaped in Markdown too


def test_wrong_schema_names_file(tmp_path, gpu_doc):
    bad = copy.deepcopy(gpu_doc)
    bad["schema"] = "gauntlet.run/0"
    path = _write(tmp_path, bad, "old.json")
    with pytest.raises(ValueError, match=r"old\.json.*schema"):
        build([path], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("records"), r"records"),
    (lambda d: d["records"][0].update(verdict="maybe"), r"records\[0\]\.verdict"),
    (lambda d: d["records"][1].update(timings={}), r"records\[1\]\.timings"),
])
def test_malformed_records_name_file_and_field(tmp_path, gpu_doc, mutate, message):
    mutate(gpu_doc)
    with pytest.raises(ValueError, match=r"run\.json.*" + message):
        build([_write(tmp_path, gpu_doc)], tmp_path / "out")


def test_missing_and_non_json_files(tmp_path):
    with pytest.raises(ValueError, match=r"nope\.json: no such file"):
        build([tmp_path / "nope.json"], tmp_path / "out")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"junk\.json: not JSON"):
        build([tmp_path / "junk.json"], tmp_path / "out")


def test_groups_by_machine_and_later_file_replaces(tmp_path, gpu_doc):
    newer = _doc([_record("gemm", "slow_tiled", speedups=(2.0, 2.0))])
    cpu = _doc([_record("gemm", "slow_tiled", device="cpu"),
                _record("gemm", "cupy_raw", verdict="unsupported", backend="cupy", device="cpu",
                        reasons=[{"code": "unsupported", "detail": "no GPU"}])], gpu=None, device="cpu")
    paths = [_write(tmp_path, gpu_doc, "a.json"), _write(tmp_path, newer, "b.json"), _write(tmp_path, cpu, "c.json")]
    md = build(paths, tmp_path / "out")["markdown"].read_text()
    assert _board(md, "NVIDIA H100 80GB HBM3 — gemm · bfloat16")[0] == "slow_tiled"   # replaced by b.json
    assert _board(md, "CPU — gemm · bfloat16") == ["slow_tiled", "cupy_raw"]
    cpu_row = next(line for line in md.split("CPU — gemm")[1].splitlines() if "| slow_tiled |" in line)
    assert "30 ex / 90 calls" in cpu_row and cpu_row.count("—") >= 4                  # no speed on CPU
    assert "peaks: not measured" in md


def test_constants_match_harness_and_reports_import_no_torch():
    from harness.reasons import VERDICTS
    from harness.judge.results import EVAL_SCHEMA, RUN_SCHEMA
    mirrored = (leaderboard.RUN_SCHEMA, leaderboard.EVAL_SCHEMA, leaderboard.VERDICTS)
    assert mirrored == (RUN_SCHEMA, EVAL_SCHEMA, VERDICTS)
    tree = ast.parse(open(leaderboard.__file__).read())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"torch", "harness", "triton", "cupy"}, imported


def test_records_judged_under_other_settings_are_flagged(tmp_path):
    a = _record("gemm", "fast_tiled", speedups=(1.6, 1.2))
    b = _record("gemm", "slow_tiled", speedups=(0.5, 0.7))
    a["fingerprint"] = {"harness": "aaaa", "options": {"examples": 30, "timing_budget_s": 15.0}}
    b["fingerprint"] = {"harness": "bbbb", "options": {"examples": 3, "timing_budget_s": 15.0}}
    result = build([_write(tmp_path, _doc([a, b]))], tmp_path / "out")
    md = result["markdown"].read_text()
    assert "## Settings" in md and "2 different settings" in md and "harness versions aaaa, bbbb" in md
    assert "options differ in: examples" in md
    b["fingerprint"] = copy.deepcopy(a["fingerprint"])
    result = build([_write(tmp_path, _doc([a, b]), "run2.json")], tmp_path / "out2")
    assert "## Settings" not in result["markdown"].read_text()


def test_a_cpu_run_lists_verdicts_without_a_fake_ranking(tmp_path):
    records = [_record("gemm", name, device="cpu") for name in ("b_tiled", "a_tiled")]
    md = build([_write(tmp_path, _doc(records, device="cpu"))], tmp_path / "out")["markdown"].read_text()
    rows = [line for line in md.splitlines() if line.startswith("| ") and "_tiled" in line]
    assert rows and all(line.split("|")[1].strip() == "—" for line in rows), rows


def test_report_reads_eval_json_and_eval_many_lines_too(tmp_path):
    """One leaderboard for every output: a real H100 `eval --json` record and real H100 eval-many lines
    (tests/data), beside each other; --json says what was written."""
    import subprocess
    import sys
    data = Path(__file__).parent / "data"
    out = subprocess.run([sys.executable, "-m", "harness", "report", str(data / "h100_triton_tiled_1.json"),
                          str(data / "h100_eval_many.jsonl"), "-o", str(tmp_path), "--json"],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "gauntlet.report/1" and doc["rows"] == 5
    md = (tmp_path / "leaderboard.md").read_text()
    assert "NVIDIA H100 80GB HBM3" in md and "a_triton_tiled" in md and "c_zeros" in md and "mismatch" in md
