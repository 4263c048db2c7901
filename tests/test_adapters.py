"""KernelBench files and GPU MODE submissions are judged through their thin wrappers (gauntlet.formats finds the
format and backend statically; gauntlet.child.adapters builds `solve` inside the confined worker) with the same
checks as a native file: known-good files pass, known-bad ones fail, a KernelBench module's weights are the
problem's inputs, and a file or pairing that cannot be judged gets a clear error blamed on whoever made it.

Fixtures: tests/adapters/. CPU judgements are kept small (one edge case, one example, float32) to bound CI time."""
import ast
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gauntlet import discover, formats
from gauntlet.judge.evaluate import Options, evaluate
from tests import needs

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "adapters"


def _judge(problem_id: str, name: str, dtype: str = "float32", **read):
    problem = discover.get_problem(problem_id)
    solution = discover.get_solution(problem_id, str(FIXTURES / name), **read)
    opts = Options(device="cpu", dtypes=(dtype,), examples=1, max_edges=1, timing=False, seed=5)
    return evaluate(problem, solution, opts)


def _codes(record) -> list[str]:
    return [r["code"] for r in record.reasons]


# --- static: format and backend, from the names a file defines --------------------------------------------------

def _read(source: str, fmt=None, backend=None) -> formats.FileFormat:
    tree = ast.parse(textwrap.dedent(source))
    literals = {n.targets[0].id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)}
    return formats.read(tree, literals, fmt, backend)


@pytest.mark.parametrize(("source", "fmt", "backend", "how"), [
    ("BACKEND = 'triton'\ndef solve(a, b): pass", "native", "triton", None),
    ("import torch.nn as nn\nclass ModelNew(nn.Module): pass", "kernelbench", "torch", "plain torch"),
    ("import triton\n@triton.jit\ndef k(x): pass\nclass ModelNew: pass", "kernelbench", "triton", "k"),
    ("from triton import jit\n@jit\ndef k(x): pass\ndef custom_kernel(data): pass", "gpumode", "triton", "k"),
    ("import cupy as cp\ndef custom_kernel(data): pass", "gpumode", "cupy", "cupy"),
    ("import cutlass.cute as cute\ndef custom_kernel(data): pass", "gpumode", "cute", "cutlass"),
    ("BACKEND = 'cupy'\ndef custom_kernel(data): pass", "gpumode", "cupy", "BACKEND in the file"),
])
def test_format_and_backend_are_found_from_the_source(source, fmt, backend, how):
    found = _read(source)
    assert (found.format, found.backend, found.error, found.unsupported) == (fmt, backend, None, None)
    if how:
        assert how in found.adapter["backend_from"]


def test_backend_option_overrides_detection_and_is_recorded():
    found = _read("import triton\n@triton.jit\ndef k(x): pass\ndef custom_kernel(data): pass", backend="torch")
    assert found.backend == "torch" and found.adapter["backend_from"] == "--backend"


@pytest.mark.parametrize(("source", "fmt", "says"), [
    ("def matmul(a, b): pass", None, "none of the formats"),
    ("def solve(a): pass\ndef custom_kernel(data): pass", None, "several formats"),
    ("def custom_kernel(data): pass", "kernelbench", "defines no class ModelNew; it looks like GPU MODE"),
    ("import triton, cupy\n@triton.jit\ndef k(x): pass\ndef custom_kernel(d): pass", None, "several backends"),
])
def test_files_that_fit_no_format_get_a_clear_error(source, fmt, says):
    found = _read(source, fmt)
    assert found.error and says in found.error, found.error


def test_load_inline_is_unsupported_not_run():
    record = _judge("gemm", "kernelbench_load_inline.py")
    assert record.verdict == "unsupported" and _codes(record) == ["unsupported"]
    assert "load_inline" in record.reasons[0]["detail"] and "compiles C++/CUDA" in record.reasons[0]["detail"]
    assert record.cases == {}                           # nothing ran: the file was never imported


def test_a_file_of_no_format_is_an_import_error_naming_the_three():
    record = _judge("gemm", "no_known_format.py")
    assert record.verdict == "error" and _codes(record) == ["import_error"] and record.format is None
    assert "class ModelNew" in record.reasons[0]["detail"] and "custom_kernel(data)" in record.reasons[0]["detail"]


# --- judged: the same worker, checks and verdicts as a native file --------------------------------------------------

@needs.triton_cpu
def test_known_good_kernelbench_triton_file_passes_with_its_own_kernel():
    record = _judge("gemm", "kernelbench_gemm_triton.py")
    assert record.verdict == "pass", record.reasons
    assert record.format == "kernelbench" and record.backend == "triton"
    assert record.adapter["mapping"] == "ModelNew(*get_init_inputs()).forward(A, B)"
    assert "matmul_kernel" in record.adapter["backend_from"]
    assert any("matmul_kernel" in k for k in record.cases["float32"]["kernels"])   # own-kernel check applied
    assert record.confinement["candidate"]["mode"]                             # the confined worker, as ever


@needs.triton_cpu
def test_known_good_gpumode_triton_submission_passes():
    record = _judge("gemm", "gpumode_gemm_triton.py")
    assert record.verdict == "pass", record.reasons
    assert record.format == "gpumode" and record.backend == "triton"
    assert any("_mm" in k for k in record.cases["float32"]["kernels"])


def test_kernelbench_parameters_are_the_problems_inputs_not_its_own_initialisation():
    """nn.Linear(64, 32) initialised at random, judged on gemm_bias_gelu's shapes: it passes only because the
    problem's weight and bias replace the module's own in every call."""
    record = _judge("gemm_bias_gelu", "kernelbench_linear_gelu.py", dtype="bfloat16")
    assert record.verdict == "pass", record.reasons
    assert "parameters weight, bias taken from the inputs" in record.adapter["mapping"]


def test_a_module_with_parameters_the_problem_does_not_give_is_refused_by_name():
    from gauntlet.child import adapters
    from tests.adapters.kernelbench_linear_extra_parameter import ModelNew
    with pytest.raises(adapters.AdapterError, match=r"3 parameter\(s\) \(scale, linear.weight, linear.bias\)"):
        adapters._match_parameters(ModelNew(4, 3), ["weight", "bias"], "gemm_bias_gelu", "f.py")
    # Matched by name where the names say it, else in registration order.
    swapped = torch.nn.Module()
    swapped.bias, swapped.weight = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3, 4))
    assert adapters._match_parameters(swapped, ["weight", "bias"], "p", "f.py") == {"weight": "weight",
                                                                                     "bias": "bias"}


def test_eval_many_judges_both_formats_bad_files_fail_and_says_which_adapter():
    """eval-many's loop (gauntlet.executors.many.judge_all, in this process to spare a judge's start-up): a batch of a
    KernelBench and a GPU MODE file, each found by its own names, each a failing line naming its wrapper."""
    from gauntlet.executors import many
    problem = discover.get_problem("gemm")
    files = [FIXTURES / n for n in ("kernelbench_gemm_drops_a_term.py", "gpumode_gemm_bf16_inputs.py")]
    stdout = io.StringIO()
    run = many.Run(len(files), "cpu")
    opts = Options(device="cpu", dtypes=("float32",), examples=1, max_edges=1, timing=False, seed=1)
    from gauntlet.executors import InlineExecutor
    many.judge_all(problem, [many.Candidate(p.stem, p) for p in files], opts, many.Lines(stdout, None),
                   InlineExecutor(), run)
    lines = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [(r["format"], r["verdict"]) for r in lines] == [("kernelbench", "fail"), ("gpumode", "fail")]
    assert [r["reasons"][0]["code"] for r in lines] == ["mismatch", "mismatch"]
    assert [r["reasons"][0]["repro"].count("--format ") for r in lines] == [1, 1]     # replays it as it was read
    assert all(r["adapter"]["backend"] == "torch" and "plain torch" in r["adapter"]["backend_from"] for r in lines)
    assert run.summary()["summary"]["verdicts"] == {"fail": 2}


# --- the user's pairing: a usage error before anything runs ----------------------------------------------------------

def test_kernelbench_file_on_a_problem_without_a_mapping_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "gauntlet", "eval", "int8_gemm",
                          str(FIXTURES / "kernelbench_gemm_triton.py"), "--device", "cpu", "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    doc = json.loads(out.stdout)
    assert out.returncode == 2 and doc["verdict"] == "usage_error" and doc["blame"] == "user", out.stdout
    assert "int8_gemm takes no KernelBench files" in doc["error"] and "GPU MODE" in doc["error"]


def test_a_forced_format_the_file_does_not_have_is_an_import_error():
    record = _judge("gemm", "gpumode_gemm_bf16_inputs.py", fmt="kernelbench")
    assert _codes(record) == ["import_error"] and "--format kernelbench" in record.reasons[0]["detail"]


def test_every_shipped_problem_states_a_kernelbench_mapping_that_names_each_input():
    supported = []
    for problem in discover.all_problems():
        if problem.root.parent != discover.problems_dir():
            continue
        mapping = problem.kernelbench
        assert mapping, f"{problem.id}: no kernelbench key (a mapping, or why not)"
        if "unsupported" in mapping:
            continue
        supported.append(problem.id)
        bounds = problem.fuzz["cpu"].dims
        shape = {d: b[0] for d, b in bounds.items()}        # the low end of each range, the first choice
        spec = next(iter(problem.dtypes.values()))
        inputs = problem.module().make_inputs(shape, spec.torch_dtype(), 0, "cpu")
        assert len(inputs) == len(mapping["inputs"]), (problem.id, mapping["inputs"])
    assert {"gemm", "bmm", "gemm_bias_gelu"} <= set(supported)
