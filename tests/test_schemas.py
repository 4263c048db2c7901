"""The published JSON Schemas (harness/schemas/, read by gauntlet.reports.schema) hold for real output: `eval --json` (a
verdict and a usage error), a results file, eval-many lines and `compare --json` on this machine, the H100 records
in tests/data, and (gpu-marked) an eval on the GPU in hand; they refuse what breaks them, and their verdicts and
reason codes are the harness's."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gauntlet.reasons import CODES, VERDICTS
from gauntlet.reports import schema

jsonschema = pytest.importorskip("jsonschema")
ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
FAST = ["--dtype", "float32", "--examples", "1", "--seed", "1"]


def _cli(*argv, device="cpu"):
    out = subprocess.run([sys.executable, "-m", "gauntlet", *map(str, argv)], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    return out.returncode, out.stdout, out.stderr


def _valid(doc, kind):
    found = schema.problems(doc, kind)
    assert not found, found


def test_the_schemas_are_schemas_and_speak_the_harness_words():
    for kind in schema.KINDS:
        jsonschema.Draft202012Validator.check_schema(schema.load(kind))
    record = schema.load("eval")["$defs"]["record"]["properties"]
    assert record["verdict"]["enum"] == list(VERDICTS)
    assert sorted(schema.load("eval")["$defs"]["reason"]["properties"]["code"]["enum"]) == sorted(CODES)


@pytest.mark.parametrize("path", sorted(DATA.glob("h100_*.json")), ids=lambda p: p.name)
def test_real_h100_records_hold(path):
    _valid(json.loads(path.read_text()), "eval")


def test_real_h100_eval_many_lines_hold():
    """`gauntlet eval-many gemm FOLDER --device cuda --dtype bfloat16 --screen` on an H100: triton_tiled, torch_matmul,
    a zeros kernel and one that raises, then the summary."""
    lines = [json.loads(line) for line in (DATA / "h100_eval_many.jsonl").read_text().splitlines()]
    assert [d.get("verdict") for d in lines] == ["pass", "pass", "fail", "error", None]
    for line in lines:
        _valid(line, "many")


def test_real_cpu_output_of_every_command_holds(tmp_path):
    code, out, _ = _cli("eval", "gemm", "torch_matmul", "--device", "cpu", *FAST, "--json")
    assert code == 0
    _valid(json.loads(out), "eval")
    code, out, _ = _cli("eval", "gemmm", "torch_matmul", "--json")
    assert code == 2
    _valid(json.loads(out), "eval")
    results = tmp_path / "results.json"
    code, out, err = _cli("run", "--problem", "gemm", "--solution", "torch_matmul", "--device", "cpu", *FAST,
                          "--out", results, "--json", "--report", tmp_path / "board")
    assert code == 0, err
    _valid(json.loads(results.read_text()), "run")
    printed = json.loads(out)                       # `run --json`: the one object is the results document
    _valid(printed, "run")
    assert printed["records"] == json.loads(results.read_text())["records"]
    assert (tmp_path / "board" / "leaderboard.html").exists()
    code, out, err = _cli("eval-many", "gemm", ROOT / "solutions" / "gemm" / "torch_matmul.py",
                          ROOT / "tests" / "bad" / "syntax_error.py", "--device", "cpu", *FAST)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 3
    for line in lines:
        _valid(line, "many")
    code, out, _ = _cli("compare", results, results, "--json")
    assert code == 0
    _valid(json.loads(out), "compare")


def test_what_breaks_a_schema_is_named():
    doc = json.loads((DATA / "h100_triton_tiled_1.json").read_text())
    doc["verdict"], doc["reasons"] = "passed", [{"code": "bogus", "detail": "x"}]
    found = " ".join(schema.problems(doc, "eval"))
    assert "verdict: 'passed'" in found and "reasons/0/code: 'bogus'" in found
    assert schema.problems({"schema": "gauntlet.many/1", "summary": {"candidates": 1}}, "many")
    with pytest.raises(ValueError, match="unknown schema"):
        schema.load("nope")


@pytest.mark.gpu
def test_an_eval_on_the_gpu_holds():
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    code, out, err = _cli("eval", "gemm", "triton_tiled", "--device", "cuda", "--dtype", "bfloat16", "--examples",
                          "1", "--max-shapes", "1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    _valid(doc, "eval")
    assert doc["timings"] and doc["timings"][0]["baselines"]["cublas"]["speedup"] > 0
