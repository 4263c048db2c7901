"""The outside clock (gauntlet.judge.timing.outside) on the CPU: the span sizes and holds, the slope fit, the bound,
the span replies' checks, and the schedule against scripted workers whose spans take a scripted time on a fake
parent clock. The GPU side (the spans themselves, the fixture tests/bad/scales_reported_times.py) runs in the `gpu`
corpus test."""
import random

import pytest
import torch

from gauntlet import protocol
from gauntlet.judge.timing import outside, spots
from gauntlet.judge.timing.bench import Schedule
from tests.test_timing_judgement import FakeWorker

FLUSH = 0.03          # ms a call's flush takes on the GPU, in the span as in a timed call
FIXED = 4.0           # ms of a span request that does not grow with its calls (request, sync, reply)
WARM = 2 if outside.WARMUP else 0     # spans a side runs before the first measurement, never fitted


def _spans(slope, fixed=FIXED, hold=5.0, sizes=(20, 60), repeats=3, noise=0.0, seed=0, pad_short=0.0):
    rng = random.Random(seed)
    return [{"n": n, "hold_ms": hold, "repeat": r, "starved": False,
             "wall_ms": fixed + hold + n * slope + rng.uniform(-noise, noise) + (pad_short if n == sizes[0] else 0)}
            for r in range(repeats) for n in sizes]


def test_span_sizes_differ_by_the_target_gpu_time_and_fit_the_longest_hold():
    n1, n2 = outside.sizes(0.23, 0.05)
    assert (n2 - n1) * 0.23 >= outside.SPAN_TARGET_MS and n1 >= 2
    assert outside.span_hold(n2, 0.05, 0.23) <= outside.SPAN_HOLD_CAP_MS
    n1, n2 = outside.sizes(0.005, 0.02)                 # a tiny call: capped
    assert n2 == outside.SPAN_MAX_CALLS
    n1, n2 = outside.sizes(0.05, 0.5)                   # a slow launch: n2 bounded by the longest hold
    assert outside.HOLD_MARGIN * n2 * (0.5 + outside.LAUNCH_EXTRA_MS) <= outside.SPAN_HOLD_CAP_MS
    assert n2 - n1 >= outside.SPAN_MIN_DIFF


def test_the_hold_outlasts_the_launches_that_outrun_the_gpu():
    assert outside.span_hold(100, 0.05, 1.0) == outside.SPAN_HOLD_MIN_MS      # the GPU is the slower: no lead needed
    assert outside.span_hold(100, 0.2, 0.05) >= 100 * 0.2                      # the host is: the hold covers it
    assert outside.span_hold(10_000, 1.0, 0.01) == outside.SPAN_HOLD_CAP_MS


def test_the_fit_recovers_the_slope_and_the_fixed_cost_through_noise():
    f = outside.fit(_spans(0.23, noise=0.1))
    assert f["slope_ms"] == pytest.approx(0.23, abs=0.006)
    assert f["fixed_ms"] == pytest.approx(FIXED, abs=0.3)
    assert (f["n1"], f["n2"]) == (20, 60)
    with pytest.raises(ValueError):
        outside.fit([s for s in _spans(0.23) if s["n"] == 60])


def test_an_honest_candidate_is_within_the_bound_and_a_scaled_one_is_tampering():
    base = outside.fit(_spans(0.20 + FLUSH + 0.002, noise=0.1, seed=1))     # cuBLAS: 0.200 ms reported
    honest = outside.fit(_spans(0.207 + FLUSH + 0.002, noise=0.1, seed=2))
    assert outside.bound(honest, base, 0.207, 0.200, FLUSH, "cublas") == []
    # Reports 0.6 of its 0.207 ms, every in-process figure made to agree: the parent's clock still sees 0.207.
    found = outside.bound(honest, base, 0.6 * 0.207, 0.200, FLUSH, "cublas")
    assert [r.code for r in found] == ["tampering"]
    assert "report 0.1242 ms a call" in found[0].detail and "own clock saw 0.20" in found[0].detail


def test_a_slower_honest_candidate_with_a_larger_fixed_cost_passes():
    base = outside.fit(_spans(0.20 + FLUSH, seed=3))
    cand = outside.fit(_spans(0.5 + FLUSH, fixed=FIXED + 1.0, seed=4))       # its reply: 1 ms more to build
    assert outside.bound(cand, base, 0.5, 0.20, FLUSH, "cublas") == []


def test_a_reply_delayed_on_the_short_spans_does_not_flatten_the_figure():
    """Padding T(n1) lowers the slope; the long spans less the baseline's fixed cost still show the time."""
    base = outside.fit(_spans(0.20 + FLUSH, sizes=(25, 400), seed=5))
    padded = outside.fit(_spans(0.20 + FLUSH, sizes=(25, 400), pad_short=30.0, seed=6))   # slope 0.08 ms lower
    assert padded["slope_ms"] < 0.20 + FLUSH - 0.07
    assert outside.outside_ms(padded, base) >= 0.20 + FLUSH - outside.INTERCEPT_SLACK_MS / padded["n2"] - 1e-9
    assert [r.code for r in outside.bound(padded, base, 0.6 * 0.20, 0.20, FLUSH, "cublas")] == ["tampering"]


# The outside clock of an honest decode GEMM (gemm/triton_persistent, 128x4096x14336, fp16) on an H200, 2026-11-29,
# after its two re-measurements: [calls, ms less the hold] in the order run, each side's spans two a repeat. Most
# spans of the candidate carried some 3.5 ms that the baseline's did not, all but one short one (9.521 ms).
RECORDED = {
    "candidate": [[149, 21.06], [54, 10.233], [54, 14.143], [149, 20.18], [149, 20.752], [54, 13.377], [54, 13.462],
                  [149, 22.614], [149, 20.605], [54, 13.031], [54, 15.341], [149, 20.761], [54, 12.673],
                  [149, 20.546], [149, 20.152], [54, 13.601], [149, 18.574], [54, 9.521]],
    "base": [[54, 9.371], [149, 17.736], [149, 17.742], [54, 10.918], [54, 10.686], [149, 17.382], [54, 10.865],
             [149, 17.861], [149, 16.009], [54, 9.87], [54, 9.251], [149, 16.456], [149, 19.97], [54, 9.926],
             [54, 12.184], [149, 16.598], [54, 9.41], [149, 16.093]],
}


def _recorded(side):
    return outside.fit([{"n": n, "wall_ms": ms, "hold_ms": 0.0, "repeat": i // 2, "starved": False}
                        for i, (n, ms) in enumerate(RECORDED[side])])


def test_an_honest_call_whose_spans_carry_a_moving_fixed_cost_is_within_the_bound():
    """The recorded spans: the fastest spans' slope (0.0953 ms) put the call a third above its events (0.0444 ms,
    cuBLAS 0.0435) and ruled it `tampering`; the median spans' slope (0.0761) does not. A fifth less reported on the
    same spans is still out of bound."""
    cand, base = _recorded("candidate"), _recorded("base")
    assert cand["slope_ms"] == pytest.approx(0.0953, abs=1e-4)
    assert cand["median_slope_ms"] == pytest.approx(0.0761, abs=1e-4)
    assert outside.bound(cand, base, 0.0444, 0.0435, FLUSH, "cublas") == []
    assert [r.code for r in outside.bound(cand, base, 0.8 * 0.0444, 0.0435, FLUSH, "cublas")] == ["tampering"]


def test_a_reply_delayed_on_most_short_spans_does_not_flatten_the_figure():
    """Delaying two short spans of three moves their median and leaves their fastest: the median spans' slope drops,
    and the long spans less the baseline's fixed cost still show the time, as when every short span is delayed."""
    base = outside.fit(_spans(0.20 + FLUSH, sizes=(25, 400), seed=7))
    spans = _spans(0.20 + FLUSH, sizes=(25, 400), seed=8)
    for s in [s for s in spans if s["n"] == 25][:2]:
        s["wall_ms"] += 30.0
    padded = outside.fit(spans)
    assert outside.gpu_ms(padded) < 0.20 + FLUSH - 0.07
    assert outside.outside_ms(padded, base) >= 0.20 + FLUSH - outside.INTERCEPT_SLACK_MS / padded["n2"] - 1e-9
    assert [r.code for r in outside.bound(padded, base, 0.6 * 0.20, 0.20, FLUSH, "cublas")] == ["tampering"]


# -- the schedule, against scripted workers on a fake parent clock -------------------------------------------------

class _Clock:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now


class SpanWorker(FakeWorker):
    """A scripted worker whose spans take `fixed + hold + n * (gpu_ms + FLUSH)` on the parent's (fake) clock, and
    whose last output is a small tensor made from the span's seed."""

    def __init__(self, name, ms, log, clock, gpu_ms=None, **kw):
        super().__init__(name, ms, log, **kw)
        self.device, self.clock = "cuda", clock
        self.gpu_ms = ms if gpu_ms is None else gpu_ms      # what the GPU really takes (ms: what the events say)
        self.spans: list = []
        self.starved_until = 0.0       # a hold shorter than this reports that it ran out
        self.reply = {}                # fields to change in every span reply
        self.last = None               # the last span's output
        self.finished_later = False    # the output changes after the reply (the reply came before the work)

    def now(self):
        return self.clock.now

    def answer(self, header, timeout, what, max_blob=0, device=None):
        if header["op"] == "bench_span_output":
            self.log.append((self.name, "bench_span_output", self.peer.stopped))
            seed, out = self.last
            if self.finished_later:
                out = out + 1
            wire, blob = protocol.tensor_to_wire(out)
            meta = {"is_tensor": True, "dtype": "float32", "shape": list(out.shape), "device": "cuda",
                    "device_type": "cuda", "aliases_input": "", "stride": [1]}
            return {"ok": True, "seed": seed, "meta": meta, "wire": wire}, [blob]
        if header["op"] != "bench_span":
            return super().answer(header, timeout, what, max_blob, device)
        self.cont()
        self.log.append((self.name, "bench_span", self.peer.stopped))
        n, hold = header["calls"], header["hold_ms"]
        self.spans.append((n, hold))
        self.clock.now += (FIXED + hold + n * (self.gpu_ms + FLUSH)) / 1e3
        self.last = (header["seed"], torch.arange(64, dtype=torch.float32) * (header["seed"] % 97))
        reply = {"ok": True, "seed": header["seed"], "starved": hold < self.starved_until,
                 "picked": protocol.picked(self.last[1], header["picks"])}
        return dict(reply, **self.reply), []


def _schedule(cand_ms=0.2, base_ms=0.2, gpu_ms=None):
    clock, log = _Clock(), []
    cand = SpanWorker("cand", cand_ms, log, clock, gpu_ms=gpu_ms, gap_ms=0.1)
    base = SpanWorker("base", base_ms, log, clock, gap_ms=0.1)
    cand.peer, base.peer = base, cand
    s = Schedule(cand, base, ["cublas"], {"shape": {}, "dtype": "bfloat16", "max_blob": 64}, timeout=5.0,
                 declared=frozenset({"_gemm_kernel"}), custom=True)
    return s, cand, base, log


def test_the_schedule_runs_both_sides_spans_interleaved_and_keeps_the_long_spans_outputs():
    s, cand, base, log = _schedule()
    s.run(budget_s=1.0)
    spans = [(who, stopped) for who, op, stopped in log if op == "bench_span"]
    assert len(spans) == 2 * (2 * outside.SPAN_REPEATS + WARM) and all(stopped for _, stopped in spans)
    assert {n for n, _ in cand.spans} == {n for n, _ in base.spans} and len({n for n, _ in cand.spans}) == 2
    n2 = max(n for n, _ in cand.spans)
    proofs = s.outside["proofs"]
    assert len(proofs) == outside.SPAN_REPEATS and all(i == n2 - 1 for i, _, _ in proofs)
    figs = s.figures()
    assert s.second_clock(figs) == []
    summary = s.outside["summary"]
    assert summary["baseline"] == "cublas" and summary["candidate"]["slope_ms"] == pytest.approx(0.2 + FLUSH, 0.02)


def test_events_that_under_report_the_gpu_are_tampering_by_the_outside_clock():
    s, cand, base, log = _schedule(cand_ms=0.12, gpu_ms=0.2)
    s.run(budget_s=1.0)
    assert not s.reasons
    found = s.second_clock(s.figures())
    assert "tampering" in [r.code for r in found]
    assert any("judge's own clock saw" in r.detail for r in found)


def test_the_long_spans_outputs_are_judged_with_the_spots(monkeypatch):
    s, cand, base, log = _schedule()
    s.run(budget_s=1.0)
    seen = []
    monkeypatch.setattr(spots, "_judge_spots", lambda judge, spec, shape, chosen, record: seen.extend(chosen) or [])
    monkeypatch.setattr(spots.peaks, "physics", lambda *a: [])
    pending = spots.Pending(judge=None, spec=None, shape={}, schedule=s, entry={}, figs=s.figures(),
                            opts=type("O", (), {"peaks": {}})(), record=None)
    assert pending.settle() == []
    assert all(p in seen for p in s.outside["proofs"])


def test_a_span_that_reports_its_hold_ran_out_is_run_again_with_a_longer_hold():
    s, cand, base, log = _schedule()
    cand.starved_until = 1e9           # it always says so: the hold grows to its cap, and the bound still applies
    s.run(budget_s=1.0)
    by_n: dict = {}
    for n, h in cand.spans:
        by_n.setdefault(n, []).append(h)
    for holds in by_n.values():
        assert holds[0] < holds[1] and max(holds) == outside.SPAN_HOLD_CAP_MS
    assert len(base.spans) == 2 * outside.SPAN_REPEATS + WARM     # the baseline's were never run again
    assert s.outside["summary"]["candidate"]["starved_spans"] == 2 * outside.SPAN_REPEATS
    assert s.second_clock(s.figures()) == []


def test_a_reply_sent_before_its_output_was_finished_is_tampering():
    s, cand, base, log = _schedule()
    cand.finished_later = True
    s.run(budget_s=1.0)
    assert [r.code for r in s.reasons] == ["tampering"] and "does not hold" in s.reasons[0].detail


@pytest.mark.parametrize("bad", [{"seed": 5}, {"starved": "no"}, {"picked": 7}, {"picked": "ab" * 5000}])
def test_a_malformed_span_reply_is_tampering(bad):
    s, cand, base, log = _schedule()
    cand.reply = bad
    s.run(budget_s=1.0)
    assert [r.code for r in s.reasons] == ["tampering"]


def test_a_baseline_span_failure_is_a_harness_error():
    s, cand, base, log = _schedule()
    base.reply = {"ok": False, "detail": "CUDA error"}
    with pytest.raises(RuntimeError, match="baseline worker failed a span"):
        s.run(budget_s=1.0)


def test_without_a_gpu_or_a_baseline_that_can_be_held_the_record_says_why():
    s, cand, base, log = _schedule()
    base.waits = True
    s.run(budget_s=1.0)
    assert s.outside["summary"] == {"skipped": "no baseline whose calls can be queued behind a hold"}
    assert not [op for _, op, _ in log if op == "bench_span"] and s.second_clock(s.figures()) == []


def test_a_judgements_first_shape_is_always_measured_and_a_later_one_by_a_draw(monkeypatch):
    """The first timed shape of a worker always gets its spans; a later one only when the draw, made after its
    rounds, says so (here forced each way)."""
    s, cand, base, log = _schedule()
    s.run(budget_s=1.0)
    assert "candidate" in s.outside and cand.outside_clocked
    for draw, measured in ((0.99, False), (0.0, True)):
        later = Schedule(cand, base, ["cublas"], {"shape": {}, "dtype": "bfloat16", "max_blob": 64}, timeout=5.0,
                         declared=frozenset({"_gemm_kernel"}), custom=True)
        monkeypatch.setattr(later.rng, "random", lambda draw=draw: draw)
        later.run(budget_s=1.0)
        assert ("candidate" in later.outside) is measured, later.outside.get("summary")
        if not measured:
            assert "not drawn" in later.outside["summary"]["skipped"] and later.second_clock(later.figures()) == []



class NoisyOnceWorker(SpanWorker):
    """An honest worker whose first `slow` long spans are each delayed by `delay_ms` (the host busy elsewhere), so
    the first measurement's slope reads high and an honest figure looks under-reported until more spans are taken."""

    def __init__(self, *a, long_n=0, slow=0, delay_ms=0.0, **kw):
        super().__init__(*a, **kw)
        self.long_n, self.slow, self.delay_ms, self.delayed = long_n, slow, delay_ms, 0

    def answer(self, header, timeout, what, max_blob=0, device=None):
        if header["op"] == "bench_span":
            if header["calls"] == self.long_n and self.delayed < self.slow:
                self.delayed += 1
                self.clock.now += self.delay_ms / 1e3
        return super().answer(header, timeout, what, max_blob, device)


def test_a_figure_out_of_bound_is_measured_again_and_an_honest_one_settles():
    """The first measurement's long spans delayed by the host (an honest figure reads well above what it reports):
    the spans are taken again, each size's fastest over all of them counts, and the figure settles inside the
    bound. An undisturbed honest figure is measured once."""
    s, cand, base, log = _schedule()
    s.run(budget_s=1.0)
    assert s.outside["summary"]["measured"] == 1 and s.second_clock(s.figures()) == []
    long_n = max(n for n, _ in cand.spans)
    s, cand, base, log = _schedule()
    noisy = NoisyOnceWorker("cand", 0.2, log, cand.clock, gap_ms=0.1, long_n=long_n,
                            slow=outside.SPAN_REPEATS + WARM // 2, delay_ms=12.0)
    noisy.peer, base.peer, s.cand = base, noisy, noisy
    s.run(budget_s=1.0)
    assert noisy.delayed == outside.SPAN_REPEATS + WARM // 2
    assert s.outside["summary"]["measured"] == 2
    assert len(noisy.spans) == 2 * 2 * outside.SPAN_REPEATS + WARM
    assert s.second_clock(s.figures()) == []


class FirstSpansWorker(SpanWorker):
    """An honest worker whose first span after the rounds takes `first_ms` more and its second `second_ms` less
    than the same span later: what an H200 showed of an honest CuTe DSL GEMM at decode (a first span 17-21 ms slow,
    the next up to 3 ms fast)."""

    def __init__(self, *a, first_ms=20.0, second_ms=3.0, **kw):
        super().__init__(*a, **kw)
        self.first_ms, self.second_ms, self.seen = first_ms, second_ms, 0

    def answer(self, header, timeout, what, max_blob=0, device=None):
        if header["op"] == "bench_span":
            self.seen += 1
            if self.seen == 1:
                self.clock.now += self.first_ms / 1e3
            elif self.seen == 2:
                self.clock.now -= self.second_ms / 1e3
        return super().answer(header, timeout, what, max_blob, device)


@pytest.mark.parametrize("warmup", [True, False])
def test_a_sides_first_spans_are_run_and_dropped_before_the_fit(monkeypatch, warmup):
    """A short call (0.04 ms, spans of about 70 and 256 calls): one span 3 ms fast moves the fastest spans' slope by
    3 ms over some 190 calls, two fifths of the call. Run first and dropped, it is not seen, and the record keeps the
    dropped spans apart; fitted, it sets that slope, and the median spans' slope keeps the honest candidate in bound
    (`outside.gpu_ms`)."""
    monkeypatch.setattr(outside, "WARMUP", warmup)
    s, cand, base, log = _schedule(cand_ms=0.04, base_ms=0.04)
    first = FirstSpansWorker("cand", 0.04, log, cand.clock, gap_ms=0.1)
    first.peer, base.peer, s.cand = base, first, first
    monkeypatch.setattr(s.rng, "shuffle", lambda order: order.reverse())   # the candidate's long span first
    s.run(budget_s=1.0)
    codes = [r.code for r in s.second_clock(s.figures())]
    summary = s.outside["summary"]["candidate"]
    if warmup:
        assert codes == [] and len(summary["warmup"]) == 2 and len(summary["spans"]) == 2 * outside.SPAN_REPEATS
    else:
        assert codes == [] and summary["warmup"] == []
        assert summary["slope_ms"] - summary["median_slope_ms"] > 0.01     # 3 ms over some 190 calls


def test_a_lie_of_a_fifth_is_measured_again_up_to_the_limit_and_ruled():
    """Events that report 0.8 of the GPU time (tests/bad/scales_reported_times.py on the GPU): out of bound at every
    measurement, so measured 1 + AGAIN times, then `tampering`."""
    s, cand, base, log = _schedule(cand_ms=0.16, gpu_ms=0.2)
    s.run(budget_s=1.0)
    assert s.outside["summary"]["measured"] == 1 + outside.AGAIN
    assert len(cand.spans) == 2 * outside.SPAN_REPEATS * (1 + outside.AGAIN) + WARM
    assert len(s.outside["proofs"]) == outside.SPAN_REPEATS * (1 + outside.AGAIN)
    assert [r.code for r in s.second_clock(s.figures())] == ["tampering"]


def test_a_timed_request_counts_the_workers_time_and_not_the_judges_work_around_it():
    """A real worker (CPU), its judge made slow around each request: continuing the worker, the /proc reads before
    and after it and the check midway each take 0.15 s more, as on a host busy with other judges. The request's
    clock (what the spans and the timed batches are timed by) leaves all of it out, and the check midway falls within
    the bound the caller gave."""
    import time

    from gauntlet import discover
    from gauntlet.judge.process.isolate import Child
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", "torch_matmul")
    child = Child(problem, solution.path, solution.backend, "cpu")
    try:
        within = []

        def slow(fn):
            def wrapped(*a, **kw):
                time.sleep(0.15)
                return fn(*a, **kw)
            return wrapped

        def midway(resp_r, within_s=None):
            within.append(within_s)
            time.sleep(0.15 * (within_s is None))        # a check that would straddle the reply: only when unbounded
            return None
        child.cont = slow(child.cont)
        child.outside.before_request = slow(child.outside.before_request)
        child.outside.after_reply = slow(child.outside.after_reply)
        child.outside.midway = midway
        case = {"op": "case", "shape": {"M": 8, "N": 8, "K": 8}, "dtype": "float32", "seed": 1}
        child.request(dict(case), 60, "a warm-up case", max_blob=1 << 20)
        clock = {"midway_s": 0.002}
        t0 = time.perf_counter()
        header, _ = child.request(dict(case, seed=2), 60, "a timed case", max_blob=1 << 20, clock=clock)
        wall = time.perf_counter() - t0
        assert header.get("ok"), header
        assert t0 < clock["sent"] < clock["replied"] <= t0 + wall
        assert wall - (clock["replied"] - clock["sent"]) >= 0.45, (wall, clock)
        assert within == [None, 0.002]
    finally:
        child.close()
