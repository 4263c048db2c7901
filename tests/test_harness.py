"""The harness's own pieces: checker rules, fuzz bounds, the wire format, problem validation, CLI errors, results."""
import json
import math
import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings

from gauntlet import discover, protocol
from gauntlet.inputs import make_inputs
from gauntlet.judge.records.results import EvalRecord, ResultsFile, load
from gauntlet.judge.timing import scoring
from gauntlet.judge.values import check, fuzz
from gauntlet.judge.values.oracle import expected_for
from gauntlet.problem import FuzzBounds, ProblemError, load_problem

GEMM = discover.get_problem("gemm")


def _expected(dtype="float32", shape=None, seed=0):
    spec = GEMM.dtype(dtype)
    inputs = make_inputs(GEMM, shape or {"M": 300, "N": 200, "K": 700}, spec, seed, "cpu")
    return spec, inputs, expected_for(GEMM, inputs, spec)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "tf32"])
def test_one_wrong_element_in_a_large_output_fails_element_wise(dtype):
    spec, _, exp = _expected(dtype)
    out = exp.torch_out.clone()
    out[123, 45] += 0.2 * (exp.oracle[123, 45].abs() + exp.scale[123, 45])   # wrong by ~20%
    reasons = check.value_reasons(out, exp, spec)
    assert {r.code for r in reasons} == {"mismatch"}
    assert "(123, 45)" in reasons[-1].detail


def test_nan_where_the_reference_is_finite_is_nan_mismatch():
    spec, _, exp = _expected()
    out = exp.torch_out.clone()
    out[0, 0] = float("nan")
    assert [r.code for r in check.value_reasons(out, exp, spec)] == ["nan_mismatch"]


def test_tf32_is_not_float32():
    """A product through TF32-rounded inputs passes the tf32 entry and fails the float32 one."""
    spec32, inputs, exp32 = _expected("float32")
    spec_tf, _, exp_tf = _expected("tf32")
    a, b = (x.view(torch.int32).bitwise_and(~0x1FFF).view(torch.float32) for x in inputs)   # keep 10 mantissa bits
    out = (a.double() @ b.double()).float()
    assert check.value_reasons(out, exp32, spec32)
    assert check.value_reasons(out, exp_tf, spec_tf) == []


def test_exact_dtype_requires_bit_equality():
    spec = GEMM.dtype("float32").__class__(name="int", torch="int32", k_norm=1, k_elem=1, floor=0, exact=True)
    oracle = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    exp = check.Expected(oracle=oracle, torch_out=oracle, scale=torch.zeros(2, 3, dtype=torch.float64))
    assert check.value_reasons(oracle.clone(), exp, spec) == []
    bad = oracle.clone()
    bad[1, 2] += 1
    assert "(1, 2)" in check.value_reasons(bad, exp, spec)[0].detail


@settings(max_examples=200, deadline=None)
@given(data=fuzz.shapes(FuzzBounds(dims={"M": (1, 384), "N": (1, 384), "K": (1, 1100)}, budget=1_500_000)))
def test_fuzzed_shapes_stay_in_bounds_and_budget(data):
    assert 1 <= data["M"] <= 384 and 1 <= data["N"] <= 384 and 1 <= data["K"] <= 1100
    assert data["M"] * data["N"] * data["K"] <= 1_500_000


def test_cpu_bounds_cross_tile_sizes():
    """The CPU check must reach past 256 in M and N and several K-tiles, or it proves little."""
    bounds = GEMM.fuzz["cpu"]
    assert bounds.dims["M"][1] > 256 and bounds.dims["N"][1] > 256 and bounds.dims["K"][1] >= 4 * 256
    assert bounds.budget >= 257 * 300


def test_case_spec_round_trips():
    text = fuzz.format_case({"M": 257, "N": 3, "K": 300}, 42)
    assert fuzz.parse_case(text, ["M", "N", "K"]) == ({"M": 257, "N": 3, "K": 300}, 42)
    with pytest.raises(discover.UsageError, match="missing"):
        fuzz.parse_case("M=1,seed=2", ["M", "N", "K"])


def test_wire_round_trip_and_lying_sizes():
    r, w = os.pipe()
    t = torch.randn(5, 7).to(torch.bfloat16)
    meta, blob = protocol.tensor_to_wire(t)
    protocol.send(w, {"wire": meta}, [blob])
    header, blobs = protocol.recv(r, timeout=5)
    assert torch.equal(protocol.tensor_from_wire(header["wire"], blobs[0]), t)
    with pytest.raises(ValueError, match="needs"):
        protocol.tensor_from_wire({"dtype": "float32", "shape": [100]}, b"\0" * 8)
    with pytest.raises(ValueError, match="unknown dtype"):
        protocol.tensor_from_wire({"dtype": "__import__", "shape": [1]}, b"\0")
    os.close(r)
    os.close(w)


def test_the_device_fold_sees_any_changed_or_swapped_element_whatever_the_layout_or_chunking(monkeypatch):
    """protocol.fold digests CUDA inputs where they live (worker and judge alike); its arithmetic is torch's, so
    the CPU runs the same code."""
    torch.manual_seed(0)
    for t in (torch.randn(300, 70).to(torch.bfloat16), torch.randn(33, 17), torch.randint(-128, 127, (999,),
              dtype=torch.int8), torch.randn(64, 8, dtype=torch.float64), torch.rand(50) > 0.5,
              torch.randn(40, 40).to(torch.float8_e4m3fn)):
        base = protocol.fold(t)
        assert len(base) == 16
        flat = t.reshape(-1)
        changed = flat.clone()
        changed.view(torch.uint8)[-1] ^= 1                   # one bit of the last element's last byte
        assert protocol.fold(changed.reshape(t.shape)) != base
        swapped = flat.clone()
        i, j = 0, next(k for k in range(1, flat.numel()) if flat.view(torch.uint8)[k * t.element_size()]
                       != flat.view(torch.uint8)[0])
        swapped[i], swapped[j] = flat[j].clone(), flat[i].clone()
        assert protocol.fold(swapped.reshape(t.shape)) != base
    # Two sign bits flipped: a plain (or keyed linear) sum of the words would miss this pair.
    t = torch.ones(2, 4, dtype=torch.float32)
    flipped = t.clone()
    flipped[0, 0], flipped[1, 3] = -1.0, -1.0
    assert protocol.fold(flipped) != protocol.fold(t)
    # The same values in any layout or chunking fold the same (the digest's metadata tells the layouts apart).
    t = torch.randn(300, 500)
    whole = protocol.fold(t.t().contiguous())
    assert protocol.fold(t.t()) == whole
    monkeypatch.setattr(protocol, "FOLD_CHUNK", 1000)
    assert protocol.fold(t.t()) == whole == protocol.fold(t.t().contiguous())
    assert protocol.fold(torch.empty(0, 3)) == bytes(16)
    assert protocol.digest(t) != protocol.digest(t.t().contiguous().t())  # CPU: sha256 of the bytes and strides


def test_stage_totals_sum_each_records_stages_and_say_where_the_time_went():
    from gauntlet.judge.records.results import describe_stages, stage_totals
    records = [{"stages_s": {"start": 2.0, "correctness": {"float32": 5.0, "bfloat16": 3.0}, "rest": 0.5}},
               {"stages_s": {"start": 1.0, "timing": {"float32": 9.0}}}, {"verdict": "error"}]
    totals = stage_totals(records)
    assert totals == {"start": 3.0, "correctness": 8.0, "rest": 0.5, "timing": 9.0}
    assert describe_stages(totals) == ("judging time by stage: timing 9 s (44%), correctness 8 s (39%), "
                                       "start 3 s (15%), rest 0 s (2%)")
    assert describe_stages({}) == ""


@pytest.mark.gpu
def test_the_fold_on_the_gpu_is_the_fold_on_the_cpu_and_the_digest_uses_it():
    """Worker and judge both fold CUDA inputs on the GPU; the same arithmetic on the CPU gives the same lanes, so a
    wrapping or reduction that differs on the device would show here first."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    torch.manual_seed(1)
    for t in (torch.randn(1 << 12, 1 << 11).to(torch.bfloat16), torch.randn(999, 17),
              torch.randint(-128, 127, (12345,), dtype=torch.int8), torch.randn(300, 500).t()):
        assert protocol.fold(t.cuda()) == protocol.fold(t)
        assert protocol.digest(t.cuda()).startswith("fold:") and protocol.digest(t.cuda()) == protocol.digest(t.cuda())
    x = torch.randn(64, 64, device="cuda")
    y = x.clone()
    y[7, 9] += 1.0
    assert protocol.digest(x) != protocol.digest(y)


def test_a_large_output_crosses_a_widened_pipe_whole_and_a_lying_length_is_refused_before_reading():
    # 24 MiB: more than one read's worth (16 MiB) and far more than the pipe holds, so both sides take turns.
    import threading
    r, w = os.pipe()
    assert protocol.widen_pipe(r) >= 1 << 16
    t = torch.arange(6 << 20, dtype=torch.int32)
    meta, blob = protocol.tensor_to_wire(t)
    sender = threading.Thread(target=protocol.send, args=(w, {"wire": meta}, [blob]))
    sender.start()
    header, blobs = protocol.recv(r, timeout=60, max_blob=t.numel() * 4)
    sender.join()
    assert not memoryview(blobs[0]).readonly          # read into one buffer, which the tensor then shares
    assert torch.equal(protocol.tensor_from_wire(header["wire"], blobs[0]), t)
    os.close(w)
    os.close(r)
    r, w = os.pipe()
    protocol.widen_pipe(r)
    # a header larger than the small-buffer limit (and the pipe)
    sender = threading.Thread(target=protocol.send, args=(w, {"pad": "x" * (2 << 20)}))
    sender.start()
    assert len(protocol.recv(r, timeout=30)[0]["pad"]) == 2 << 20
    sender.join()
    protocol.send(w, {"wire": {}}, [b"\0" * 64])
    with pytest.raises(ValueError, match="over the 32 bytes expected"):
        protocol.recv(r, timeout=5, max_blob=32)
    os.close(r)
    os.close(w)


def test_a_large_blob_crosses_the_sealed_area_and_nothing_the_sender_does_there_reaches_the_judge():
    """protocol.Area: the worker's large blobs go through a shared-memory file the judge sealed before the worker
    existed. The worker can neither resize it (so the judge's read cannot fault) nor change a blob the judge has
    taken; a place outside the area, or over the reply's cap, is refused like a lying length."""
    import fcntl
    import threading
    judge = protocol.Area.create(64 << 20)
    if judge is None:
        pytest.skip("no sealable memfd here")
    worker = protocol.Area.attach(os.dup(judge.fd))
    for resize in (lambda: os.ftruncate(worker.fd, 1 << 20), lambda: os.ftruncate(worker.fd, 128 << 20)):
        with pytest.raises(PermissionError):
            resize()
    with pytest.raises(PermissionError):
        fcntl.fcntl(worker.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)   # F_SEAL_SEAL: no seal can be added
    assert os.fstat(judge.fd).st_size == 64 << 20
    r, w = os.pipe()
    t = torch.arange(6 << 20, dtype=torch.int32)      # 24 MiB: into the area
    small = torch.arange(10, dtype=torch.int64)       # 80 bytes: through the pipe
    (meta, blob), (small_meta, small_blob) = protocol.tensor_to_wire(t), protocol.tensor_to_wire(small)
    protocol.send(w, {"wire": meta}, [blob, small_blob], area=worker)
    header, blobs = protocol.recv(r, timeout=30, max_blob=t.numel() * 4, area=judge)
    assert "at" not in header and len(blobs) == 2
    worker.put(0, b"\xff" * 4096)                      # the sender writes over the area afterwards
    assert torch.equal(protocol.tensor_from_wire(header["wire"], blobs[0]), t)
    assert torch.equal(protocol.tensor_from_wire(small_meta, blobs[1]), small)
    # Places the judge refuses: outside the area, over the cap, not a place, no area on this channel.
    for at, cap, area, match in (([[60 << 20, 8 << 20]], 64 << 20, judge, "outside"),
                                 ([[-1, 16]], 64, judge, "outside"),
                                 ([[0, 4096]], 64, judge, "over the 64 bytes"),
                                 ([[0, True]], 64, judge, "not \\[offset, length\\]"),
                                 ([[0, 16], None], 64, judge, "not a list of 1"),
                                 ([[0, 16]], 64, None, "does not have")):
        head = json.dumps({"nblobs": 1, "at": at}).encode()
        os.write(w, protocol._LEN.pack(len(head)) + head)
        with pytest.raises(ValueError, match=match):
            protocol.recv(r, timeout=5, max_blob=cap, area=area)
    # A blob larger than what is left of the area goes through the pipe instead, whole.
    big = torch.arange(20 << 20, dtype=torch.int32)   # 80 MiB > 64 MiB
    meta, blob = protocol.tensor_to_wire(big)
    sender = threading.Thread(target=protocol.send, args=(w, {"wire": meta}, [blob]), kwargs={"area": worker})
    sender.start()
    header, blobs = protocol.recv(r, timeout=60, max_blob=big.numel() * 4, area=judge)
    sender.join()
    assert torch.equal(protocol.tensor_from_wire(header["wire"], blobs[0]), big)
    for fd in (r, w):
        os.close(fd)
    worker.close()
    judge.close()


def _spot_area():
    """A sealed area (the judge's side) holding a 2 MiB tensor's blob at offset 4096, written by the worker's side;
    skips where this kernel has no sealable memfd."""
    judge = protocol.Area.create(8 << 20)
    if judge is None:
        pytest.skip("no sealable memfd here")
    worker = protocol.Area.attach(os.dup(judge.fd))
    t = torch.arange(1 << 19, dtype=torch.float32).reshape(512, 1024)          # 2 MiB
    meta, blob = protocol.tensor_to_wire(t)
    worker.put(4096, blob)
    return judge, worker, t, meta


def test_a_spot_blob_taken_for_the_gpu_where_no_cuda_runs_is_read_from_the_area_as_host_bytes(monkeypatch):
    """Area.take with a CUDA device (a spot-checked timed output) in a process where CUDA is not running takes the
    host path: a copy of the bytes, read by tensor_from_wire like any blob, size check included. Whether CUDA runs
    in this process is the process's state, not the test's: under pytest -n a GPU test that ran earlier in the same
    xdist worker has started it, so the test says "not running" itself (the device path is the test below)."""
    import warnings
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    judge, worker, t, meta = _spot_area()
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # the read-only mapping's warning is the harness's to silence
        view = protocol._area_view(judge.map, 4096, t.numel() * 4)
    assert view.dtype == torch.uint8 and torch.equal(protocol.tensor_from_wire(meta, view.clone()), t)
    with pytest.raises(ValueError, match="needs"):
        protocol.tensor_from_wire(meta, view[:-4].clone())
    del view
    host = judge.take(4096, t.numel() * 4, device="cuda")
    assert not isinstance(host, torch.Tensor) and torch.equal(protocol.tensor_from_wire(meta, host), t)
    worker.close()
    judge.close()


@pytest.mark.gpu
def test_a_spot_blob_taken_for_the_gpu_is_read_from_the_area_as_a_tensor_and_checked_like_any_blob():
    """Area.take with a CUDA device where CUDA runs (the judge on a GPU): the bytes go from the judge's read-only
    mapping onto the device as a uint8 tensor (protocol._area_view, then one copy to the device), which
    tensor_from_wire reads like a host blob, size check included; bytes the worker writes there afterwards change
    nothing taken."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    torch.cuda.init()
    judge, worker, t, meta = _spot_area()
    on = judge.take(4096, t.numel() * 4, device="cuda")
    assert isinstance(on, torch.Tensor) and on.is_cuda and on.dtype == torch.uint8 and on.numel() == t.numel() * 4
    worker.put(4096, bytes(t.numel() * 4))            # the worker zeroes the area: the copy taken stands
    assert torch.equal(protocol.tensor_from_wire(meta, on).cpu(), t)
    with pytest.raises(ValueError, match="needs"):
        protocol.tensor_from_wire(meta, on[:-4])
    worker.close()
    judge.close()


def test_a_judgement_s_large_outputs_come_back_through_the_worker_s_area(monkeypatch):
    """The area end to end, on the CPU: a confined worker (Landlock and seccomp where the kernel has them) inherits
    its sealed area, writes a 2.9 MB output there, and the judge takes it out and passes the case."""
    from gauntlet.judge.evaluate import Options, evaluate
    if protocol.Area.create(1 << 20) is None:
        pytest.skip("no sealable memfd here")
    places = []
    taken = protocol._from_area
    monkeypatch.setattr(protocol, "_from_area",
                        lambda area, where, cap, dev=None: (places.append(where), taken(area, where, cap, dev))[1])
    problem = discover.get_problem("bmm")
    record = evaluate(problem, discover.get_solution("bmm", "torch_bmm"),
                      Options(device="cpu", dtypes=("float32",), case="B=5,M=384,N=384,K=1,seed=3"))
    assert record.verdict == "pass", record.reasons
    assert places and all(where == [0, 5 * 384 * 384 * 4] for where in places)


def test_recv_times_out_instead_of_hanging():
    r, w = os.pipe()
    with pytest.raises(protocol.ChannelTimeout):
        protocol.recv(r, timeout=0.2)
    os.close(r)
    os.close(w)


def test_a_start_cut_short_by_the_total_time_limit_names_the_total():
    """Under load a worker's start can outlast what is left of the judgement's total: the verdict names the total
    (the bound in force), not the start's own 300 s limit, which it never reached."""
    from gauntlet.judge.process.isolate import Child, ChildFailed
    from gauntlet.judge.process.watchdog import TimeBudget
    r, w = os.pipe()
    child = object.__new__(Child)              # the channel and budget only: no process to start for this
    child.resp_r, child.budget, child.close, child.area = r, TimeBudget(0.3), lambda: None, None
    with pytest.raises(ChildFailed) as info:
        child._await_hello()
    assert "total time limit of 0 s ran out while starting" in info.value.reason.detail
    os.close(r)
    os.close(w)


def test_bad_problem_files_name_the_file_and_key(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "problem.yaml").write_text("id: bad\ndims: [M]\n")
    with pytest.raises(ProblemError, match=r"problem.yaml: missing key 'dtypes'"):
        load_problem(folder)
    (folder / "problem.yaml").write_text(
        "id: bad\ndims: [M]\ndtypes: {float32: {torch: float32}}\nfuzz: {cpu: {M: [0, 4]}}\n"
        "benchmark: []\nbaselines: {}\nflops: 'M'\nbytes: 'M'\n")
    with pytest.raises(ProblemError, match=r"fuzz.cpu.M must be"):
        load_problem(folder)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gauntlet", *args], capture_output=True, text=True, timeout=120)


def test_cli_unknown_problem_lists_known_and_exits_2():
    out = _cli("eval", "gem", "x.py")
    assert out.returncode == 2
    assert "unknown problem 'gem'" in out.stderr and "did you mean 'gemm'" in out.stderr and "known:" in out.stderr


def test_cli_missing_file_and_unknown_dtype_exit_2():
    assert _cli("eval", "gemm", "nope/missing.py").returncode == 2
    out = _cli("eval", "gemm", "torch_matmul", "--dtype", "fp64", "--device", "cpu")
    assert out.returncode == 2 and "unknown dtype 'fp64'" in out.stderr


def test_cli_list_shows_problems_solutions_and_backends():
    out = _cli("list")
    assert out.returncode == 0
    for word in ("gemm", "torch_matmul", "triton_tiled", "cupy_wmma", "cute_gemm", "backends on this machine"):
        assert word in out.stdout


def test_results_file_is_valid_after_each_record_and_resumes(tmp_path):
    path = tmp_path / "r.json"
    rf = ResultsFile(path, {"device": "cpu"})
    rf.add(EvalRecord(problem="gemm", solution="a", path="a.py", backend="torch", device="cpu"))
    assert load(path)["records"][0]["solution"] == "a"
    again = ResultsFile(path, {"device": "cpu"})
    assert again.done() == {"gemm/a@cpu"}
    with pytest.raises(ValueError, match="schema"):
        (tmp_path / "x.json").write_text(json.dumps({"schema": "other"}))
        load(tmp_path / "x.json")


def test_scoring_geomean_fast_p_and_interval():
    assert scoring.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert scoring.fast_p([0.9, 1.2, 1.6], 1.0) == pytest.approx(2 / 3)
    lo, hi = scoring.speedup_ci([2.0] * 20, [1.0, 1.1] * 10)
    assert lo <= 2.0 / 1.05 <= hi + 1e-9


def test_edge_cases_reach_each_dims_largest_odd_value_and_top():
    from gauntlet.judge.values.fuzz import edge_cases
    bounds = discover.get_problem("gemm").fuzz["cpu"]
    cases = edge_cases(bounds)
    for dim, (lo, hi) in bounds.dims.items():
        others = {d: bounds.dims[d][0] for d in bounds.dims if d != dim}
        assert dict(others, **{dim: hi if hi % 2 else hi - 1}) in cases, dim
        assert dict(others, **{dim: hi}) in cases, dim
    assert all(math.prod(c.values()) <= bounds.budget for c in cases)
    # and one case large in every dim at once: the longest K with a whole tile of outputs, where a too-narrow
    # accumulator shows (one output element alone can stay inside its budget)
    full = [c for c in cases if c["M"] > 1 and c["N"] > 1]
    # and its aligned twin, and the wide case last (large and misaligned outputs: tests/test_net.py)
    assert full == [{"M": 35, "N": 35, "K": 1099}, {"M": 32, "N": 32, "K": 1088}, {"M": 383, "N": 383, "K": 9}]


def test_about_half_the_draws_align_every_dim():
    """Fast paths branch on alignment (TMA: 16-byte rows); independent per-dim draws almost never align all dims at
    once, so the strategy draws about half its shapes with every dim a multiple of one alignment (8 to 128)."""
    from hypothesis import HealthCheck, given, settings
    from gauntlet.judge.values.fuzz import shapes
    bounds = discover.get_problem("int8_gemm").fuzz["cpu"]
    hits = []

    @settings(max_examples=2000, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(shapes(bounds))
    def draw(shape):
        hits.append(all(shape[d] % 16 == 0 for d in ("M", "N", "K")))

    draw()
    share = sum(hits) / len(hits)
    assert 0.25 < share < 0.75, share


def test_random_draws_alone_rarely_reach_the_top_odd_values():
    """Why the edge cases exist: over 2000 random draws of gemm's CPU domain, odd K >= 1041 comes up in a few
    percent of cases (measured: README), too rarely for 20 examples to be sure of meeting it."""
    from hypothesis import HealthCheck, given, settings
    from gauntlet.judge.values.fuzz import shapes
    bounds = discover.get_problem("gemm").fuzz["cpu"]
    hits = []

    @settings(max_examples=2000, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(shapes(bounds))
    def draw(shape):
        hits.append(shape["K"] % 2 == 1 and shape["K"] >= 1041)

    draw()
    share = sum(hits) / len(hits)
    assert share < 0.02, share


def test_the_profiler_the_worker_runs_is_watched_down_to_its_enter_and_exit(monkeypatch):
    """The worker's CallProfiler runs torch.autograd.profiler.profile as a context (gauntlet.child.profiling): a
    candidate that swapped its __exit__ (or the start behind __enter__) would blind every later call's check, so the
    tamper watch names them."""
    import torch.autograd.profiler as autograd_profiler

    from gauntlet.child import guard
    watch = guard.TamperWatch()
    for name in ("__enter__", "__exit__", "_start_trace"):
        monkeypatch.setattr(autograd_profiler.profile, name, lambda self, *a: None)
        assert f"torch.autograd.profiler.profile.{name}" in watch.changed()
        monkeypatch.undo()
    assert watch.changed() == []


def test_the_tamper_watch_s_fast_lookup_answers_as_getattr_static_does():
    """guard.static_lookup reads namespaces directly, with getattr_static's answer for every watched name, and sees
    what getattr_static does not: a data descriptor set on a class's metaclass, which Python's lookup prefers."""
    import inspect
    import types

    from gauntlet.child import guard
    watch = guard.TamperWatch()
    assert len(watch.items) > 500
    for _, owner, attr in watch.items:
        if not isinstance(owner, dict):
            assert guard.static_lookup(owner, attr) is inspect.getattr_static(owner, attr, None), attr
    mod = types.ModuleType("m")
    mod.f = lambda: 1
    original = guard.static_lookup(mod, "f")

    class Swapped(types.ModuleType):
        f = property(lambda self: 2)      # a data descriptor on the module's new class shadows its dict
    mod.__class__ = Swapped
    assert mod.f == 2 and guard.static_lookup(mod, "f") is not original
    assert guard.static_lookup(mod, "f") is inspect.getattr_static(mod, "f")

    class Meta(type):
        pass

    class C(metaclass=Meta):
        def g(self):
            return 1
    before = guard.static_lookup(C, "g")
    assert before is C.__dict__["g"]
    Meta.g = property(lambda cls: "patched")   # the metaclass's data descriptor wins over the class's own
    assert C.g == "patched" and guard.static_lookup(C, "g") is Meta.__dict__["g"]
    assert inspect.getattr_static(C, "g") is before       # (getattr_static still answers the class's own)
    Meta.h = lambda cls: "not a data descriptor"          # a plain function on the metaclass does not win
    C.h = 5
    assert C.h == 5 and guard.static_lookup(C, "h") == 5
    assert guard.static_lookup(C, "missing") is None


def test_a_candidate_whose_import_loads_torch_inductor_is_not_tampering(tmp_path):
    """torch._inductor's first import sets TORCHINDUCTOR_CACHE_DIR, a variable the worker watches. The worker no
    longer imports it itself (its profiler skips the wrapper that did), so a candidate's import may be the first
    (torch.nn.attention's did, found judging attention_fwd/torch_sdpa on an H100): the worker's environment sets
    the variable to its scratch dir beforehand, and the import changes nothing."""
    sol = tmp_path / "imports_inductor.py"
    sol.write_text("import torch\nimport torch._inductor.config  # noqa: F401\n\nBACKEND = 'torch'\nDTYPES = ('float32',)\n\n\n"
                   "def solve(a, b):\n    return torch.matmul(a, b)\n")
    out = _cli("eval", "gemm", str(sol), "--device", "cpu", "--examples", "1", "--json")
    record = json.loads(out.stdout)
    assert record["verdict"] == "pass", record["reasons"]
