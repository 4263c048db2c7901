"""Every problem's checker must reject its negative controls: zeros, an input passed through, the op computed in a
lower precision, plus any controls the problem defines itself (`negative_controls()` in reference.py, e.g. a
quantized problem computed without quantization). Run in-process on the CPU: these test the judge, not a child."""
import pytest
import torch

from gauntlet import discover
from gauntlet.inputs import make_inputs, matmul_precision
from gauntlet.judge.values import check
from gauntlet.judge.values.oracle import expected_for

# A precision strictly below each dtype's promise.
LOWER = {torch.float32: torch.bfloat16, torch.float16: torch.float8_e4m3fn, torch.bfloat16: torch.float8_e4m3fn}


def _lower_precision(module, spec):
    def run(*inputs):
        lowered = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                low = torch.bfloat16 if spec.tf32 else LOWER.get(x.dtype, torch.float8_e4m3fn)
                lowered.append(x.to(low).to(x.dtype))
            else:
                lowered.append(x)
        with matmul_precision(spec):
            return module.reference(*lowered)
    return run


def _controls(problem, spec):
    module = problem.module()
    controls = {
        "zeros": lambda *x: torch.zeros_like(module.reference(*x)),
        "input_passed_through": lambda *x: next(t for t in x if isinstance(t, torch.Tensor)).clone(),
    }
    if spec.torch_dtype().is_floating_point:   # integer-input problems bring their own (negative_controls())
        controls["lower_precision"] = _lower_precision(module, spec)
    if hasattr(module, "negative_controls"):
        controls.update(module.negative_controls())
    return controls


def _cases():
    for problem in discover.all_problems():
        for name, spec in problem.dtypes.items():
            for control in _controls(problem, spec):
                yield pytest.param(problem.id, name, control, id=f"{problem.id}-{name}-{control}")


def _shape(problem):
    """A mid-sized shape inside the CPU bounds, away from the degenerate 1s."""
    shape = {}
    for d, b in problem.fuzz["cpu"].dims.items():
        shape[d] = b[0] if not isinstance(b, tuple) else min(b[1], max(b[0], 67))
    return shape


@pytest.mark.parametrize("problem_id,dtype,control", list(_cases()))
def test_checker_rejects_negative_control(problem_id, dtype, control):
    problem = discover.get_problem(problem_id)
    spec = problem.dtype(dtype)
    shape = _shape(problem)
    inputs = make_inputs(problem, shape, spec, seed=1234, device="cpu")
    expected = expected_for(problem, inputs, spec)
    out = _controls(problem, spec)[control](*inputs)
    meta = {"is_tensor": True, "dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape),
            "device_type": "cpu"}
    reasons = check.structural_reasons(meta, expected, "cpu") or check.value_reasons(out, expected, spec)
    assert reasons, f"{problem_id}/{dtype}: the {control} control passed the checker"


@pytest.mark.parametrize("problem_id", discover.problem_ids())
def test_checker_accepts_the_reference_itself(problem_id):
    """The other side of the coin: torch's own answer, and the oracle rounded to the output dtype, must pass."""
    problem = discover.get_problem(problem_id)
    for name, spec in problem.dtypes.items():
        inputs = make_inputs(problem, _shape(problem), spec, seed=99, device="cpu")
        expected = expected_for(problem, inputs, spec)
        assert check.value_reasons(expected.torch_out, expected, spec) == [], name
        assert check.value_reasons(expected.oracle.to(expected.dtype), expected, spec) == [], name
