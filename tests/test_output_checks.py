"""Every timed call's output is checked (gauntlet.judge.values.taken, .sampled): the problems' `rows` and `factors`
hooks agree with their reference, honest outputs pass the sampled rows and the random projection, lazy ones fail,
and a batch reply that does not describe its outputs is refused. CPU only: the outputs reach TimedOutputs as reply
blobs here, as they do on the GPU where the judge's buffer cannot be mapped (the buffer itself: tests/bad/ fixtures
on the GPU)."""
from __future__ import annotations

import pytest
import torch

from gauntlet import discover, protocol
from gauntlet.child import guard
from gauntlet.inputs import make_inputs
from gauntlet.judge.values import sampled
from gauntlet.judge.values.oracle import expected_for
from gauntlet.judge.values.taken import BadOutputs, TimedOutputs

SMALL = {"M": 96, "N": 80, "K": 136}
ATTN = {"B": 2, "Hkv": 2, "G": 2, "Sq": 24, "Sk": 40, "D": 64}
HOOKED = [("gemm", SMALL), ("gemm_layouts", dict(SMALL, layout="TN")), ("bmm", dict(SMALL, B=3)),
          ("attn_scores", ATTN), ("attn_output", ATTN), ("int8_gemm", SMALL), ("w8a8_gemm", SMALL),
          ("gemm_bias_gelu", SMALL), ("fp8_gemm_rowwise", SMALL), ("fp8_gemm_blockwise", {"M": 40, "N": 48, "K": 300})]


def _first_dtype(problem):
    return next(iter(problem.dtypes.values())) if isinstance(problem.dtypes, dict) else problem.dtypes[0]


@pytest.mark.parametrize(("name", "shape"), HOOKED, ids=[h[0] for h in HOOKED])
def test_a_problem_s_rows_and_factors_give_its_oracle_s_rows_and_product(name, shape):
    problem = discover.get_problem(name)
    module = problem.module()
    spec = _first_dtype(problem)
    inputs = make_inputs(problem, shape, spec, 5, "cpu")
    full = expected_for(problem, inputs, spec)
    index = torch.tensor([0, 3, full.oracle.shape[-2] - 1])
    part = expected_for(problem, tuple(module.rows(index, *inputs)), spec)
    # float64 BLAS may block a few rows differently from the whole: equal to float64's own rounding
    torch.testing.assert_close(part.oracle, full.oracle.index_select(-2, index), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(part.torch_out, full.torch_out.index_select(-2, index))
    if hasattr(module, "factors"):
        x, y = module.factors(*inputs)
        assert x.dtype == y.dtype == torch.float64
        torch.testing.assert_close(x @ y, full.oracle.to(torch.float64), rtol=1e-12, atol=1e-9)


def _batch(name, dtype, shape, solve, calls=4, rows=True, factors=True):
    """A TimedOutputs that took one batch of `calls` outputs of solve(k, *inputs) (as reply blobs), and its
    judgement."""
    problem = discover.get_problem(name)
    spec = problem.dtype(dtype)
    probe = expected_for(problem, make_inputs(problem, shape, spec, 0, "cpu"), spec)
    taken = TimedOutputs(problem, spec, shape, probe, "cpu")
    taken.has_rows &= rows
    taken.has_factors &= factors
    outputs, blobs = [], []
    for k in range(calls):
        seed = 7000 + k
        inputs = make_inputs(problem, shape, spec, seed, "cpu")
        out = solve(k, *inputs)
        wire, blob = protocol.tensor_to_wire(out)
        outputs.append({"seed": seed, "meta": guard.describe_output(out, tuple(inputs)), "slot": False,
                        "wire": wire, "blob": k})
        blobs.append(blob)
    taken.take({"outputs": outputs}, blobs, calls, {0})
    return taken, taken.judge()


def _lazy(a, b):
    keep = a.shape[-1] - a.shape[-1] // 4            # a quarter of K skipped
    return a[..., :keep] @ b[..., :keep, :]


def _honest_variants(dtype):
    """Honest ways of computing a 16-bit or fp32 GEMM: torch's, fp32 accumulation rounded once, split-K in fp32."""
    def fp32_once(k, a, b):
        return (a.float() @ b.float()).to(a.dtype)

    def split_k(k, a, b):
        h = a.shape[-1] // 3
        return (a[..., :h].float() @ b[..., :h, :].float() + a[..., h:].float() @ b[..., h:, :].float()).to(a.dtype)
    return [lambda k, a, b: a @ b, fp32_once, split_k]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("name", ["gemm", "bmm"])
def test_honest_outputs_pass_the_projection_and_the_rows_with_room(name, dtype):
    shape = dict(SMALL, K=1000, **({"B": 2} if name == "bmm" else {}))
    for solve in _honest_variants(dtype):
        taken, reasons = _batch(name, dtype, shape, solve, calls=3)
        assert reasons == [], reasons
        # Room: an honest output stays within 4 of the T_SIGMAS = 10 bounds (sums of bounded errors of random
        # sign: their largest column of hundreds is 2 to 3 standard deviations, each at most one bound).
        problem, spec = taken.problem, taken.spec
        for kept in taken.taken:
            inputs = make_inputs(problem, shape, spec, kept["seed"], "cpu")
            x, y = problem.module().factors(*inputs)
            want = ((kept["r"].double().unsqueeze(-2) @ x) @ y).squeeze(-2)
            loose = dict(kept, proj=want + (kept["proj"] - want) * sampled.T_SIGMAS / 4)
            assert sampled.projection_reasons(problem, spec, inputs, loose) == []


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_call_that_skips_a_quarter_of_k_fails_the_projection_alone_and_the_rows_alone(dtype):
    shape = dict(SMALL, K=1024)
    lazy_on_third = lambda k, a, b: _lazy(a, b) if k == 2 else a @ b       # noqa: E731
    for rows, factors, says in ((False, True, "random projection"), (True, False, "rows")):
        _, reasons = _batch("gemm", dtype, shape, lazy_on_third, rows=rows, factors=factors)
        assert reasons and {r.code for r in reasons} == {"mismatch"}, reasons
        assert all("timed call 3 of 4" in r.detail and says in r.detail for r in reasons), reasons


def test_an_int8_output_off_by_one_in_one_element_fails_the_exact_projection():
    def one_off(k, a, w):
        out = (a.double() @ w.double().T).to(torch.int32)
        out[5, 7] += 1
        return out
    _, reasons = _batch("int8_gemm", "int8", SMALL, one_off, calls=1, rows=False)
    assert [r.code for r in reasons] == ["mismatch"] and "column (7,)" in reasons[0].detail


def test_a_nan_planted_in_one_element_is_judged_on_its_own():
    def nan_one(k, a, b):
        out = a @ b
        out[11, 3] = float("nan")
        return out
    _, reasons = _batch("gemm", "bfloat16", SMALL, nan_one, calls=1, rows=False)
    assert [r.code for r in reasons] == ["nan_mismatch"] and "(11, 3)" in reasons[0].detail


def test_a_wrongly_typed_output_is_judged_by_its_description():
    _, reasons = _batch("gemm", "bfloat16", SMALL, lambda k, a, b: (a @ b).float(), calls=2)
    assert [r.code for r in reasons] == ["wrong_dtype"]


def test_the_full_copies_are_the_calls_asked_for_and_judged_as_spots_would_read_them():
    taken, _ = _batch("gemm", "bfloat16", SMALL, lambda k, a, b: a @ b, calls=3)
    header, blobs = taken.copy(0)
    out = protocol.tensor_from_wire(header["wire"], blobs[0])
    inputs = make_inputs(taken.problem, SMALL, taken.spec, header["seed"], "cpu")
    assert torch.equal(out, inputs[0] @ inputs[1])
    assert taken.copy(1) == ({}, [])


@pytest.mark.parametrize("outputs", [None, [], [{"seed": 1}], [{"seed": -1, "meta": {"is_tensor": False}}],
                                     [{"seed": 1, "meta": {"is_tensor": True, "dtype": "bfloat16"}}]])
def test_a_reply_that_does_not_describe_its_outputs_is_refused(outputs):
    problem = discover.get_problem("gemm")
    spec = problem.dtype("bfloat16")
    probe = expected_for(problem, make_inputs(problem, SMALL, spec, 0, "cpu"), spec)
    taken = TimedOutputs(problem, spec, SMALL, probe, "cpu")
    with pytest.raises(BadOutputs):
        taken.take({"outputs": outputs}, [], 1, set())


def test_a_tensor_output_neither_in_its_slot_nor_in_the_reply_is_refused():
    problem = discover.get_problem("gemm")
    spec = problem.dtype("bfloat16")
    probe = expected_for(problem, make_inputs(problem, SMALL, spec, 0, "cpu"), spec)
    taken = TimedOutputs(problem, spec, SMALL, probe, "cpu")
    meta = {"is_tensor": True, "dtype": "bfloat16", "shape": [96, 80], "stride": [80, 1], "device": "cpu",
            "device_type": "cpu", "aliases_input": ""}
    with pytest.raises(BadOutputs, match="neither in its slot"):
        taken.take({"outputs": [{"seed": 1, "meta": meta, "slot": True}]}, [], 1, set())


def test_sampled_rows_cover_enough_elements_and_stay_inside_the_output():
    import random
    rng = random.Random(3)
    assert len(sampled.draw_rows((4096, 4096), rng)) == sampled.MIN_ROWS
    assert len(sampled.draw_rows((4096, 64), rng)) == sampled.ROW_ELEMENTS // 64 if \
        sampled.ROW_ELEMENTS // 64 <= sampled.MAX_ROWS else sampled.MAX_ROWS
    assert sampled.draw_rows((3, 5), rng) == [0, 1, 2]
    rows = sampled.draw_rows((2, 32, 4096, 4096), rng)
    assert len(rows) == sampled.MIN_ROWS and all(0 <= i < 4096 for i in rows)


def test_the_schedule_takes_every_candidate_batch_s_outputs_with_the_worker_stopped_and_never_asks_for_one():
    """Through bench.Schedule with scripted workers: each candidate batch's outputs are taken right after its reply,
    the candidate's worker stopped by then; no request ever names a call to return (no `bench_spot`); a lazy call
    in any batch is named at the judgement; and the spots are the judge's own copies."""
    from gauntlet.judge.timing import spots
    from gauntlet.judge.timing.bench import Schedule
    from tests.test_timing_judgement import FakeWorker

    problem = discover.get_problem("gemm")
    spec = problem.dtype("bfloat16")
    probe = expected_for(problem, make_inputs(problem, SMALL, spec, 0, "cpu"), spec)
    taken = TimedOutputs(problem, spec, SMALL, probe, "cpu")
    stopped_when_taken, seen_ops = [], []
    real_take = taken.take

    def take(header, blobs, calls, full):
        stopped_when_taken.append(cand.stopped)
        return real_take(header, blobs, calls, full)
    taken.take = take

    class Candidate(FakeWorker):
        lazy_batch = 6                  # batches counts the empty batch before each: the third timed batch

        def answer(self, header, timeout, what, max_blob=0, device=None):
            seen_ops.append(header["op"])
            reply, blobs = super().answer(header, timeout, what, max_blob, device)
            if header["op"] == "bench_batch" and header["calls"]:
                reply["outputs"] = []
                for k in range(header["calls"]):
                    seed = 100 * self.batches + k
                    a, b = make_inputs(problem, SMALL, spec, seed, "cpu")
                    out = _lazy(a, b) if (self.batches, k) == (self.lazy_batch, 1) else a @ b
                    wire, blob = protocol.tensor_to_wire(out)
                    reply["outputs"].append({"seed": seed, "meta": guard.describe_output(out, (a, b)),
                                             "slot": False, "wire": wire, "blob": len(blobs)})
                    blobs = blobs + [blob]
            return reply, blobs

    log: list = []
    cand, base = Candidate("cand", 0.2, log), FakeWorker("base", 0.25, log)
    cand.peer, base.peer = base, cand
    s = Schedule(cand, base, ["cublas"], {"shape": SMALL, "dtype": "bfloat16", "max_blob": 1 << 20}, timeout=5.0,
                 declared=frozenset({"_gemm_kernel"}), custom=True, outputs=taken)
    s.run(budget_s=2.0)
    spots.final_spots(s)
    batches = sum(1 for op in seen_ops if op == "bench_batch") // 2          # each batch follows an empty one
    assert batches >= 8 and stopped_when_taken == [True] * batches and not s.reasons
    assert "bench_spot" not in seen_ops and len(taken.taken) == batches * s.calls
    assert s.spots and all(header.get("wire") for _, header, _ in s.spots)
    reasons = taken.judge()
    assert reasons and {r.code for r in reasons} == {"mismatch"}
    assert f"timed call {2 * s.calls + 2} of {len(taken.taken)}" in reasons[0].detail


class _FakeView:
    """handoff.View over host memory: the worker's buffer as the judge maps it."""
    fail = False

    def __init__(self, handle, slots, nbytes):
        if _FakeView.fail:
            from gauntlet.handoff import HandoffError
            raise HandoffError("cudaIpcOpenMemHandle failed: cudaErrorMapBufferObjectFailed (205)")
        self.handle, self.slots, self.nbytes = dict(handle), slots, nbytes
        self.buf = torch.zeros(slots * nbytes, dtype=torch.uint8)
        self.poisoned = 0

    def slot(self, k):
        return self.buf[k * self.nbytes:(k + 1) * self.nbytes]

    def poison(self):
        self.buf.fill_(0xFF)
        self.poisoned += 1

    def close(self):
        pass


def test_the_worker_s_buffer_is_mapped_once_read_then_poisoned_and_may_not_change(monkeypatch):
    from gauntlet import handoff
    monkeypatch.setattr(handoff, "View", _FakeView)
    monkeypatch.setattr(_FakeView, "fail", False)
    problem = discover.get_problem("gemm")
    spec = problem.dtype("bfloat16")
    probe = expected_for(problem, make_inputs(problem, SMALL, spec, 0, "cpu"), spec)
    taken = TimedOutputs(problem, spec, SMALL, probe, "cpu")
    taken.device = "cuda"                    # asks for a buffer; nothing here touches a GPU
    assert taken.handle(2) == {"slots": 2, "nbytes": taken.nbytes}
    outs = []
    for k in range(2):
        a, b = make_inputs(problem, SMALL, spec, 50 + k, "cpu")
        outs.append({"seed": 50 + k, "meta": guard.describe_output(a @ b, (a, b)), "slot": True})
    handle = {"ipc": "00" * 64, "device": 0, "slots": 2, "nbytes": taken.nbytes, "stride": taken.nbytes}

    def fill(view):
        for k, out in enumerate(outs):
            a, b = make_inputs(problem, SMALL, spec, out["seed"], "cpu")
            view.slot(k).copy_((a @ b).reshape(-1).view(torch.uint8))
    real_view = taken._view

    def view_then_fill(header, calls):      # the worker wrote its slots before the reply
        v = real_view(header, calls)
        fill(v)
        return v
    monkeypatch.setattr(taken, "_view", view_then_fill)
    taken.take({"outputs": outs, "drop": handle}, [], 2, set())
    assert taken.drop.poisoned == 1 and len(taken.taken) == 2 and all("proj" in kept for kept in taken.taken)
    monkeypatch.setattr(taken, "_view", real_view)
    taken.handle(2)
    with pytest.raises(BadOutputs, match="changed"):
        taken.take({"outputs": outs, "drop": dict(handle, ipc="11" * 64)}, [], 2, set())

    # A host where the judge cannot map the worker's buffer: that batch's outputs go unread, the reply carries the
    # rest, and the record says so.
    monkeypatch.setattr(_FakeView, "fail", True)
    other = TimedOutputs(problem, spec, SMALL, probe, "cpu")
    other.device = "cuda"
    other.handle(2)
    other.take({"outputs": outs, "drop": handle}, [], 2, set())
    assert other.summary()["unread"] == 2 and "cudaErrorMapBufferObjectFailed" in other.summary()["via"]
    assert other.handle(2) is None
    with pytest.raises(BadOutputs, match="neither in its slot"):
        other.take({"outputs": outs}, [], 2, set())        # a slot claimed in a batch that asked for none
