"""The self-describing adversarial corpus: every file in tests/bad/ and tests/good/ that declares a module-level
EXPECTED is judged here on problem `gemm`, and must get that outcome.

Each file says, as literals read with `ast` (never imported in this process):
- EXPECTED: a reason code the judgement must include (bad files), or "pass" (good files);
- DEVICE: "cpu", or "cuda" for tricks that need a GPU (marked `gpu`, skipped without one);
- optional DTYPES: the first one is judged (default float32); ALSO_ACCEPTED: other codes that are as right
  where the cheat's outcome depends on the allocator or a race (documented in the file);
- optional CASE: replay one case ("M=..,N=..,K=..,seed=..") instead of fuzzing;
- optional SCRATCH_REPO: the file writes into the source tree, so it is judged through the CLI inside a scratch
  copy of the repository (marked with .gauntlet_scratch_copy), never in this tree: parallel judgements are not
  disturbed and nothing here is ever modified;
- optional TIMING (cuda only): the trick acts in the timing phase, so one benchmark shape is timed too, with the
  device's peaks measured first (the roofline check needs them);
- optional SERIAL: the outcome depends on the host or card being left to the judgement, which pytest -n cannot
  promise (the judges' turns hold off other judges, not other tests' processes), so it is marked `serial` and runs
  alone; the file says why.
Files without EXPECTED are the original fixtures, listed in tests/test_bad_solutions.py.
"""
from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gauntlet import discover
from gauntlet.judge.evaluate import Options, evaluate
from tests import needs

HERE = Path(__file__).parent
ROOT = HERE.parent
CPU_EXAMPLES = 2          # after the domain's edge cases (up to 10), which catch most of the corpus
GPU_EXAMPLES = 5
HINTS = ("EXPECTED", "DEVICE", "DTYPES", "ALSO_ACCEPTED", "CASE", "SCRATCH_REPO", "TIMING", "SERIAL")
# Never copied into a scratch repository: caches, environments, results, carried build outputs.
_NOT_COPIED = {".git", ".carry", ".gauntlet", ".hypothesis", ".venv", ".pytest_cache", "__pycache__", "results",
               "build", ".whl"}


def _hints(path: Path) -> dict:
    """Module-level literal assignments of the hint names; {} when the file does not parse or has no EXPECTED."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in HINTS:
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found if isinstance(found.get("EXPECTED"), str) else {}


def _corpus() -> list:
    params = []
    for kind in ("bad", "good"):
        for path in sorted((HERE / kind).glob("*.py")):
            hints = _hints(path)
            if not hints:
                continue
            device = hints.get("DEVICE", "cpu")
            marks = ([pytest.mark.gpu] if device == "cuda" else []) + ([pytest.mark.serial] if hints.get("SERIAL")
                                                                         else [])
            params.append(pytest.param(kind, path, hints, id=f"{kind}/{path.stem}", marks=marks))
    return params


CORPUS = _corpus()


def _dtype(hints: dict) -> str:
    dtypes = hints.get("DTYPES")
    return dtypes[0] if dtypes else "float32"


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


@functools.lru_cache(maxsize=None)
def _peaks(dtype: str) -> dict:
    import torch

    from gauntlet.judge.timing.peaks import measure_peaks
    spec = discover.get_problem("gemm").dtype(dtype)
    return measure_peaks(torch.device("cuda"), {dtype: (spec.torch_dtype(), spec.tf32)})


def _judge_here(path: Path, hints: dict, device: str) -> dict:
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", str(path))
    timeout = (8.0 if device == "cpu" else 30.0) if hints["EXPECTED"] == "timeout" else 120.0
    opts = Options(device=device, dtypes=(_dtype(hints),), examples=CPU_EXAMPLES if device == "cpu" else GPU_EXAMPLES,
                   case=hints.get("CASE"), case_timeout_s=timeout, shrink=False, timing=False)
    if device == "cuda" and hints.get("TIMING"):
        bench = next(b for b in problem.benchmark if (b["M"], b["N"], b["K"]) == (4096, 4096, 4096))
        opts.timing, opts.shapes, opts.timing_budget_s = True, [bench], 4.0
        opts.peaks = _peaks(_dtype(hints))
    return evaluate(problem, solution, opts).to_json()


def _not_copied(folder: str, names: list) -> list:
    skip = [n for n in names if n in _NOT_COPIED or n.endswith(".egg-info")]
    return skip + (["out"] if Path(folder).name == "reports" and "out" in names else [])


def _judge_in_scratch_copy(path: Path, hints: dict, device: str, tmp_path: Path) -> dict:
    """Judge through the CLI inside a copy of the repository, so a candidate that writes into the source tree only
    ever writes into the copy. The copy's harness (tests.needs.scratch_env) watches the copy's tree."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=_not_copied)
    (copy / ".gauntlet_scratch_copy").write_text("a scratch copy made by tests/test_corpus_extra.py\n")
    target = copy / path.relative_to(ROOT)
    cmd = [sys.executable, "-m", "gauntlet", "eval", "gemm", str(target), "--device", device,
           "--dtype", _dtype(hints), "--examples", str(CPU_EXAMPLES if device == "cpu" else GPU_EXAMPLES), "--json"]
    if hints.get("CASE"):
        cmd += ["--case", hints["CASE"]]
    env = needs.scratch_env(copy)
    out = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), f"CLI failed ({out.returncode}):\n{out.stderr[-3000:]}"
    return json.loads(out.stdout)


@pytest.mark.parametrize(("kind", "path", "hints"), CORPUS)
def test_corpus_file_gets_its_expected_outcome(kind, path, hints, tmp_path):
    device = hints.get("DEVICE", "cpu")
    if device == "cuda" and not _cuda_available():
        pytest.skip("needs a CUDA device")
    if hints.get("SCRATCH_REPO"):
        record = _judge_in_scratch_copy(path, hints, device, tmp_path)
    else:
        record = _judge_here(path, hints, device)
    codes = [r["code"] for r in record["reasons"]]
    shown = "\n".join(f"  [{r['code']}] {r['detail'][:400]}" for r in record["reasons"]) or "  (no reasons)"
    if record["verdict"] == "unsupported":
        pytest.skip("; ".join(r["detail"] for r in record["reasons"]))
    if kind == "good":
        assert record["verdict"] == "pass", f"{path.name}: expected pass, got {record['verdict']}:\n{shown}"
        return
    expected = hints["EXPECTED"]
    accepted = {expected, *hints.get("ALSO_ACCEPTED", ())}
    assert record["verdict"] != "pass", f"{path.name}: expected {expected}, but it passed"
    assert accepted & set(codes), f"{path.name}: expected {expected} (or {sorted(accepted - {expected})}), " \
                                  f"got {record['verdict']}:\n{shown}"


def test_corpus_is_big_enough_and_well_formed():
    """At least 35 known-bad files in all (the original fixtures included) and 5 known-good ones; every hinted
    file names a known reason code and a known device, and good files expect a pass."""
    from gauntlet.reasons import CODES
    bad = sorted((HERE / "bad").glob("*.py"))
    good = [p for p in CORPUS if p.values[0] == "good"]
    assert len(bad) >= 35 and len(good) >= 5, (len(bad), len(good))
    for param in CORPUS:
        kind, path, hints = param.values
        assert hints.get("DEVICE", "cpu") in ("cpu", "cuda"), path.name
        if kind == "good":
            assert hints["EXPECTED"] == "pass", path.name
        else:
            assert hints["EXPECTED"] in CODES and hints["EXPECTED"] != "unsupported", path.name
            assert all(c in CODES for c in hints.get("ALSO_ACCEPTED", ())), path.name
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert "Expected:" in doc, f"{path.name}: docstring"
        assert not hints.get("SERIAL") or "Serial:" in doc, f"{path.name}: a SERIAL file's docstring says why"
