"""Triton's CPU interpreter, as the harness patches it (gauntlet.backends.triton_interpreter), gives the GPU's answers:
autotuned kernels run (one config, named), float casts round as on an H100 (fp8 included), and a third-party-style
fp8 kernel that uses a plain `.to(tl.float8e4nv)` is judged `pass` on the CPU, as it would be on the GPU.

Each fix has a canary beside it that runs Triton's own interpreter and shows the bug is still there: when Triton
fixes one, its canary fails and the patch can go.

Kernels are compiled with TRITON_INTERPRET=1 set only while this module is imported and while its tests run, so the
rest of a pytest session (a GPU run included) is not switched to the interpreter.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
import torch
from tests import needs

_saved = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"          # triton.jit picks the interpreter at decoration time
try:
    import triton
    import triton.language as tl

    @triton.jit
    def _cast(x_ptr, y_ptr, n, BLOCK: tl.constexpr, DST: tl.constexpr, RTZ: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        if RTZ:
            y = x.to(DST, fp_downcast_rounding="rtz")
        else:
            y = x.to(DST)
        tl.store(y_ptr + offs, y, mask=offs < n)

    @triton.jit
    def _widen(q_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(q_ptr + offs, mask=offs < n).to(tl.float32), mask=offs < n)

    @triton.jit
    def _dot16(a_ptr, b_ptr, c_ptr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))

    def _sum_body(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))

    CONFIGS = [triton.Config({"BLOCK": 16}, num_warps=2), triton.Config({"BLOCK": 32}, num_warps=4),
               triton.Config({"BLOCK": 64}, num_warps=8, num_stages=4)]

    # A split reduction: each program adds its partial sum into out. Needs out zeroed before the real run.
    _sum_reset = triton.autotune(CONFIGS, key=["n"], reset_to_zero=["out_ptr"])(triton.jit(_sum_body))
    _sum_no_reset = triton.autotune(CONFIGS, key=["n"])(triton.jit(_sum_body))
    _sum_pruned = triton.autotune(
        CONFIGS, key=["n"], reset_to_zero=["out_ptr"],
        prune_configs_by={"early_config_prune": lambda configs, nargs, **kw: [c for c in configs
                                                                             if c.kwargs["BLOCK"] >= 32]},
    )(triton.jit(_sum_body))

    @triton.autotune(CONFIGS[:2], key=["n"], restore_value=["x_ptr"])
    @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
    @triton.jit
    def _add_one_in_place(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if EVEN:
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)
        else:
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)
finally:
    if _saved is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = _saved

from gauntlet.backends import triton_interpreter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAT = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
TL = {torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e5m2: tl.float8e5, torch.bfloat16: tl.bfloat16,
      torch.float16: tl.float16}


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    """The harness's patches, as the child installs them for a Triton solution on the CPU; removed afterwards."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_interpreter.patch_interpreter(), triton_interpreter.unsupported_internals()
    assert triton_interpreter.mark_launches()
    yield
    triton_interpreter.unpatch_interpreter()


@contextlib.contextmanager
def _unpatched():
    triton_interpreter.unpatch_interpreter()
    try:
        yield
    finally:
        assert triton_interpreter.patch_interpreter()


def test_triton_internals_are_the_ones_the_patches_were_checked_against():
    """A Triton upgrade must fail here first, not silently bring the interpreter's own numerics back."""
    assert triton_interpreter.unsupported_internals() == []


def test_a_changed_interpreter_is_refused_loudly():
    """If Triton's builder no longer looks as the patch expects, the patch stays out and says why."""
    from triton.runtime import interpreter as interp
    with _unpatched(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(interp.InterpreterBuilder, "create_fp_to_fp", lambda self, src, dst_type: None)
        with pytest.warns(UserWarning, match="create_fp_to_fp is missing or its signature changed"):
            assert triton_interpreter.patch_interpreter() is False
        assert "_gauntlet_interpreter_patch" not in interp.InterpreterBuilder.__dict__


# -- float casts ---------------------------------------------------------------------------------------------------

def _hard_values() -> torch.Tensor:
    """fp32 values at the places the interpreter got wrong, for e4m3fn, e5m2, bf16 and fp16 alike, both signs."""
    p = 2.0 ** torch.arange(-30, 20, dtype=torch.float64)
    ties = [1 + 1 / 16, 1 + 3 / 16, 1 + 1 / 8, 1 + 3 / 8,          # e4m3 / e5m2: halfway, even below and above
            1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -11, 1 + 3 * 2 ** -11]   # bf16 / fp16
    carries = [1.9375, 1.875, 1.99, 15.9, 2 - 2 ** -9, 2 - 2 ** -12, 0.999]   # round up into the next binade
    subnormals = [2 ** -10, 3 * 2 ** -10, 5 * 2 ** -10, 15 * 2 ** -10, 2 ** -10 + 2 ** -20,    # e4m3 (min 2**-9)
                  2 ** -17, 3 * 2 ** -17, 7 * 2 ** -17, 2 ** -16,                                # e5m2 (min 2**-16)
                  2 ** -25, 3 * 2 ** -25, 2 ** -24, 1e-40, 9.2e-41, 2 ** -149, 2 ** -126]      # fp16, fp32/bf16
    big = [448, 449, 464, 470, 479, 480, 1000, 57344, 60000, 61439, 61440, 65504, 65519, 65520, 1e9, 3.4028235e38,
           float("inf"), float("nan"), 0.0]
    base = torch.tensor(ties + carries + subnormals + big, dtype=torch.float64)
    scaled = (torch.tensor(ties + carries, dtype=torch.float64)[:, None] * p[None, :]).flatten()
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(4000, generator=g, dtype=torch.float64) * 2.0 ** torch.randint(-24, 20, (4000,), generator=g)
    raw = torch.randint(-2 ** 31, 2 ** 31 - 1, (4000,), generator=g, dtype=torch.int64).to(torch.int32)
    x = torch.cat([base, scaled, noise]).float()
    return torch.cat([x, -x, raw.view(torch.float32)])


def _run_cast(x: torch.Tensor, dtype: torch.dtype, rtz: bool = False) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=dtype)
    _cast[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024, DST=TL[dtype], RTZ=rtz)
    return y


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16}[t.element_size()]).to(torch.int32)


def _assert_same(got: torch.Tensor, want: torch.Tensor, x: torch.Tensor, what: str) -> None:
    """Bit for bit where the answer is a number, NaN where it is NaN (NaN payloads are not compared)."""
    nan, got_nan = want.float().isnan(), got.float().isnan()
    bad = (nan != got_nan) | ((_bits(got) != _bits(want)) & ~nan)
    shown = [(float(x[i]), float(got[i]), float(want[i])) for i in bad.nonzero().flatten()[:6]]
    assert not bad.any(), f"{what}: {int(bad.sum())} of {x.numel()} differ (input, got, want): {shown}"


def _gpu_nearest_even(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """What the GPU's `x.to(dtype)` gives: torch's CPU cast (round to nearest even, subnormals kept), except that
    the GPU's fp8 cast (cvt.rn.satfinite) saturates at the largest finite value where torch's e5m2 cast overflows
    to inf; clamping first is the same thing."""
    return (x.clamp(-SAT[dtype], SAT[dtype]) if dtype in SAT else x).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16],
                         ids=["e4m3fn", "e5m2", "bf16", "fp16"])
def test_fp32_downcast_rounds_like_the_gpu(dtype):
    x = _hard_values()
    _assert_same(_run_cast(x, dtype), _gpu_nearest_even(x, dtype), x, f"fp32 -> {dtype}")


def test_torch_reference_saturates_e4m3_and_overflows_e5m2():
    """The reference above leans on torch's CPU casts; this pins what they do beyond the largest finite value. For
    e4m3fn that depends on the torch found: 448 (saturating) in torch 2.13, NaN in torch 2.11 (seen on the H100
    runner). Neither reaches a verdict: the reference above and every problem's reference clamp to +-448 before
    they cast (problems/fp8_*/reference.py), and a clamped cast gives 448 on both."""
    x = torch.tensor([470.0, float("inf"), 61440.0])
    assert x[:2].clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float().tolist() == [448.0, 448.0]
    raw = x[:2].to(torch.float8_e4m3fn).float()
    assert raw.tolist() == [448.0, 448.0] or bool(raw.isnan().all()), raw
    assert x[1:].to(torch.float8_e5m2).float().tolist() == [float("inf")] * 2


def _toward_zero_reference(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round toward zero by search on the list of every finite value of `dtype` (independent of the patch's
    arithmetic): the representable value of largest magnitude not above |x|; infinities and NaN are kept."""
    codes = torch.arange(2 ** torch.finfo(dtype).bits).to(torch.uint8 if dtype.itemsize == 1 else torch.int16)
    grid = codes.view(dtype).double()
    grid = torch.unique(grid[torch.isfinite(grid) & (grid >= 0)])
    ax = x.double().abs()
    idx = torch.searchsorted(grid, ax, right=True) - 1
    mag = torch.where(torch.isfinite(ax), grid[idx.clamp(min=0)], ax)
    return torch.copysign(mag, x.double()).to(dtype)           # exact: every value is on dtype's grid


@pytest.mark.parametrize("dtype", [torch.float8_e5m2, torch.bfloat16, torch.float16], ids=["e5m2", "bf16", "fp16"])
def test_fp32_downcast_toward_zero_when_asked(dtype):
    x = _hard_values()
    _assert_same(_run_cast(x, dtype, rtz=True), _toward_zero_reference(x, dtype), x, f"fp32 -> {dtype} rtz")


def test_a_cast_the_gpu_cannot_compile_is_refused():
    """Triton's NVIDIA backend has no fp32 -> e4m3fn conversion rounding toward zero (a compile error there)."""
    with pytest.raises(Exception, match="does not compile on the GPU"):
        _run_cast(torch.ones(4), torch.float8_e4m3fn, rtz=True)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16],
                         ids=["e4m3fn", "e5m2", "bf16"])
def test_narrow_floats_widen_exactly(dtype):
    """Every code, subnormals, inf and NaN included, read back as torch reads it."""
    n = 2 ** torch.finfo(dtype).bits
    q = torch.arange(n).to(torch.uint8 if n == 256 else torch.int16).view(dtype)
    y = torch.empty(n)
    _widen[(triton.cdiv(n, 1024),)](q, y, n, BLOCK=1024)
    want = q.float()
    assert torch.equal(y.isnan(), want.isnan()) and torch.equal(y[~want.isnan()], want[~want.isnan()])


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3fn", "e5m2"])
def test_fp8_dot_decodes_its_operands_exactly(dtype):
    a = torch.arange(256).remainder(64).to(torch.uint8).view(dtype).reshape(16, 16)   # finite, subnormals included
    c = torch.empty(16, 16)
    _dot16[(1,)](a, torch.eye(16).to(dtype), c)
    assert torch.equal(c, a.float())


def test_canary_triton_own_interpreter_still_rounds_fp8_wrong():
    """Remove the cast patch when this fails: Triton's interpreter then rounds fp32 -> e4m3fn as the GPU does."""
    x = torch.tensor([1 + 1 / 16, 1.9375, 3 * 2 ** -10])     # a tie, a carry, a subnormal
    with _unpatched():
        got = _run_cast(x, torch.float8_e4m3fn)
    assert got.float().tolist() != _gpu_nearest_even(x, torch.float8_e4m3fn).float().tolist()


# -- autotune ------------------------------------------------------------------------------------------------------

def _launches(fn) -> list[str]:
    with torch.profiler.profile() as prof:
        fn()
    return [e.name.removeprefix("gauntlet::launch::") for e in prof.events()
            if e.name.startswith("gauntlet::launch::")]


def _sum(kernel, x, out):
    kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())


def test_autotuned_kernel_runs_its_first_config_zeroes_reset_buffers_and_says_which(capsys):
    x = torch.arange(100, dtype=torch.float32)
    out = torch.full((1,), 123.0)            # reset_to_zero must clear this before the run that counts
    names = _launches(lambda: _sum(_sum_reset, x, out))
    assert out.item() == x.sum().item()
    note = "_sum_body [autotune: config 1 of 3: BLOCK=16, num_warps=2, num_stages=3]"
    assert names and set(names) == {note}      # the one "benchmark" run and the real one
    assert "autotuned kernel _sum_body runs config 1 of 3 without benchmarking" in capsys.readouterr().err


def test_prune_configs_by_is_applied_before_the_first_config_is_taken():
    x = torch.arange(50, dtype=torch.float32)
    out = torch.zeros(1)
    names = _launches(lambda: _sum(_sum_pruned, x, out))
    assert out.item() == x.sum().item()
    assert set(names) == {"_sum_body [autotune: config 2 of 3: BLOCK=32, num_warps=4, num_stages=3]"}


def test_accumulating_without_reset_to_zero_is_wrong_here_as_on_the_gpu():
    """On the GPU the autotuner runs the kernel (many times) before the real call of a new key, so a kernel that
    accumulates into its output without reset_to_zero is wrong; here the one "benchmark" run makes it wrong too.
    A known key runs once, with no tuning, as on the GPU."""
    x = torch.arange(60, dtype=torch.float32)
    first, again = torch.zeros(1), torch.zeros(1)
    _sum(_sum_no_reset, x, first)
    _sum(_sum_no_reset, x, again)
    assert (first.item(), again.item()) == (2 * x.sum().item(), x.sum().item())


def test_restore_value_and_heuristics_under_autotune():
    """restore_value undoes the "benchmark" run's in-place update, so the caller sees exactly one; the heuristic
    meta-parameter is computed per call (EVEN for n=64 with BLOCK=16, not for n=70)."""
    for n in (64, 70):
        x = torch.arange(n, dtype=torch.float32)
        _add_one_in_place[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)
        assert torch.equal(x, torch.arange(n, dtype=torch.float32) + 1)


def test_canary_triton_own_autotuner_cannot_run_under_the_interpreter():
    """Remove the autotune patch when this fails: Triton's autotuner then works without a GPU driver. Where a GPU
    driver is active (a GPU runner), the autotuner finds it and the bug this canary watches cannot show."""
    if torch.cuda.is_available():
        pytest.skip("a GPU driver is active here: Triton's autotuner finds it, so the driverless bug cannot show")
    x = torch.arange(10, dtype=torch.float32)
    with _unpatched(), pytest.raises(RuntimeError, match="active drivers"):
        _sum(triton.autotune(CONFIGS, key=["n"])(triton.jit(_sum_body)), x, torch.zeros(1))


# -- judged end to end ---------------------------------------------------------------------------------------------

@needs.triton_cpu
def test_third_party_fp8_kernel_with_a_plain_cast_passes_on_the_cpu():
    """tests/good/fp8_rowwise_plain_cast.py quantizes with `.to(tl.float8e4nv)` (no rounding workaround) under
    @triton.autotune: the judge runs it in a worker, as for any solution, and it must pass, as on an H100; the
    record names the autotune config that ran. One case with tails in M, N and K keeps it to seconds."""
    from gauntlet import discover
    from gauntlet.judge.evaluate import Options, evaluate
    path = ROOT / "tests" / "good" / "fp8_rowwise_plain_cast.py"
    record = evaluate(discover.get_problem("fp8_gemm_rowwise"), discover.get_solution("fp8_gemm_rowwise", str(path)),
                      Options(device="cpu", case="M=9,N=67,K=300,seed=7", timing=False, shrink=False))
    shown = "; ".join(f"[{r['code']}] {r['detail'][:300]}" for r in record.reasons)
    assert record.verdict == "pass", shown
    kernels = record.cases["float8_e4m3"]["kernels"]
    assert any("[autotune: config 1 of 2: BLOCK_K=512" in k for k in kernels), kernels
