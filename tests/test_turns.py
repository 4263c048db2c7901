"""Judges sharing one GPU take turns (gauntlet.judge.timing.turns): correctness side by side, timing alone; and what the
timing does when the GPU was busy while other judges shared the card (gauntlet.judge.timing.timed)."""
from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gauntlet.judge.timing import timed, turns
from gauntlet.judge.timing.turns import Turns, TurnTimeout

ROOT = Path(__file__).resolve().parents[1]

HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from gauntlet.judge.timing.turns import Turns
    with getattr(Turns(sys.argv[1], {folder!r}), sys.argv[2])():
        print("in", time.monotonic(), flush=True)
        time.sleep(float(sys.argv[3]))
    print("out", time.monotonic(), flush=True)
""")


def _holder(folder: Path, mode: str, seconds: float, key: str = "card", wait: bool = True) -> subprocess.Popen:
    """Another judge's process holding the `key` lock pair (a card's, or the host's) for `seconds`; with `wait`,
    returned once it holds it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT), folder=str(folder)), key, mode,
                             str(seconds)], stdout=subprocess.PIPE, text=True)
    if wait:
        assert proc.stdout.readline().startswith("in")          # holding now
    return proc


def _recording(log: list):
    """turn(name): a stand-in for one of gauntlet.judge.timing.turns' functions that logs `name` each time it is
    entered."""
    import contextlib

    def turn(name):
        @contextlib.contextmanager
        def cm(device):
            log.append(name)
            yield
        return cm
    return turn


def test_correctness_calls_share_the_card(tmp_path):
    other = _holder(tmp_path, "sharing", 3)
    t0 = time.monotonic()
    with Turns("card", tmp_path).sharing():
        waited = time.monotonic() - t0
    other.wait()
    assert waited < 1.0


def test_a_timing_waits_for_correctness_in_flight_and_then_has_the_card_alone(tmp_path):
    other = _holder(tmp_path, "sharing", 1.5)
    mine = Turns("card", tmp_path)
    t0 = time.monotonic()
    with mine.alone():
        waited = time.monotonic() - t0
        # While this judge times, another judge's correctness call waits.
        late = _holder(tmp_path, "sharing", 0, wait=False)
        time.sleep(1.0)
        released = time.monotonic()
    entered = float(late.stdout.readline().split()[1])
    late.wait()
    other.wait()
    assert waited > 1.0
    assert entered >= released - 0.05


def test_a_waiting_timing_is_not_starved_by_a_stream_of_shared_turns(tmp_path, monkeypatch):
    """The gate: once a judge waits for the card alone (past the first STEP_FOR_S of its wait, where the gate opens
    briefly: the next tests), no new correctness turn begins before it."""
    monkeypatch.setattr(turns, "STEP_FOR_S", 0.0)
    first = _holder(tmp_path, "sharing", 1.0)
    mine = Turns("card", tmp_path)
    results = {}

    import threading

    def time_alone():
        with mine.alone():
            results["alone_at"] = time.monotonic()

    thread = threading.Thread(target=time_alone)
    thread.start()
    time.sleep(0.3)                    # the timing judge now waits at the gate
    second = _holder(tmp_path, "sharing", 0, wait=False)
    second_in = float(second.stdout.readline().split()[1])
    thread.join()
    first.wait()
    second.wait()
    assert second_in > results["alone_at"]


STREAM = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from gauntlet.judge.timing.turns import Turns
    turns = Turns("card", {folder!r})
    print("ready", flush=True)
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        with turns.sharing():
            began = time.monotonic()
            time.sleep(float(sys.argv[2]))
            print("call", began, time.monotonic(), flush=True)
""")


def _stream(folder: Path, seconds: float, call_s: float) -> subprocess.Popen:
    """Another judge making short correctness calls one after another for `seconds`."""
    proc = subprocess.Popen([sys.executable, "-c", STREAM.format(root=str(ROOT), folder=str(folder)), str(seconds),
                             str(call_s)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("ready")
    return proc


def _calls(proc: subprocess.Popen) -> list[tuple[float, float]]:
    out, _ = proc.communicate(timeout=60)
    return [(float(b), float(e)) for _, b, e in (line.split() for line in out.splitlines() if line.startswith("call"))]


def test_while_a_long_call_drains_the_gate_opens_for_short_calls_and_the_turn_alone_stays_alone(tmp_path):
    """Turns._drain: a timing judge waits for a long correctness call (a candidate compiling on a cold cache); another
    judge's short calls go on meanwhile instead of waiting at the gate, none of them runs inside the turn alone, and
    the turn alone begins soon after the long call ends (within a short call and a step)."""
    long_call = _holder(tmp_path, "sharing", 2.5)
    stream = _stream(tmp_path, 4.0, 0.05)
    time.sleep(0.2)
    mine = Turns("card", tmp_path)
    asked = time.monotonic()
    with mine.alone():
        alone_from = time.monotonic()
        time.sleep(0.5)
        alone_until = time.monotonic()
    ended = float(long_call.stdout.read().split()[-1])
    long_call.wait()
    calls = _calls(stream)
    during_drain = [c for c in calls if asked + 0.5 < c[0] < ended]
    assert len(during_drain) >= 2                    # one or two per step of the 2.3 s wait (4 steps)
    assert not [c for c in calls if c[1] > alone_from and c[0] < alone_until]
    assert alone_from - ended < turns.STEP_EVERY_S + 0.6      # slack for a loaded 2-core CI machine


@pytest.mark.serial      # the gate opens for 70 ms twice: beside other tests on 2 cores the streams missed both once
def test_the_gate_opens_only_early_in_a_wait_so_a_stream_of_calls_cannot_starve_a_timing(tmp_path, monkeypatch):
    """Two judges whose short calls overlap would keep the card shared for ever if the gate kept opening: past
    STEP_FOR_S the waiting judge holds the gate and has its turn alone once the calls in flight end."""
    monkeypatch.setattr(turns, "STEP_FOR_S", 1.0)
    streams = [_stream(tmp_path, 8.0, 0.8) for _ in range(2)]       # overlapping: the card never free
    time.sleep(0.3)
    asked = time.monotonic()
    with Turns("card", tmp_path).alone():
        alone_from = time.monotonic()
    calls = [c for s in streams for c in _calls(s)]
    assert alone_from - asked < 1.0 + turns.STEP_EVERY_S + 0.8 + 0.6    # far before the streams' end
    assert [c for c in calls if asked + 0.5 < c[0] < alone_from]          # the gate did open meanwhile


def test_a_turn_alone_made_shared_lets_correctness_in_and_keeps_timing_out_until_it_ends(tmp_path):
    """Turns.share_from_alone (a timed shape's spots fetched after its rounds): the card is never let go, so another
    judge's correctness call starts at once but another judge's timing waits for this turn's end; and the turn's
    end releases everything (the next judge's turn alone is granted)."""
    mine = Turns("card", tmp_path)
    with mine.alone():
        shared = _holder(tmp_path, "sharing", 0, wait=False)
        time.sleep(0.5)
        assert shared.poll() is None                 # still kept out while the turn is alone
        mine.share_from_alone()
        shared_in = float(shared.stdout.readline().split()[1])
        timing = _holder(tmp_path, "alone", 0, wait=False)
        time.sleep(0.5)
        assert timing.poll() is None                 # the card is still held, shared
        with mine.sharing():                         # nested: free, and nothing changes
            pass
        released = time.monotonic()
    timing_in = float(timing.stdout.readline().split()[1])
    shared.wait()
    timing.wait()
    assert shared_in < released and timing_in >= released - 0.05
    with pytest.raises(RuntimeError, match="harness bug"):
        with mine.alone():
            mine.share_from_alone()
            with mine.alone():                       # alone inside what is now a shared turn: refused
                pass
    with mine.sharing():
        mine.share_from_alone()                      # not alone: nothing to do
    with Turns("card", tmp_path).alone():            # and everything was let go
        pass


def test_share_now_makes_a_host_alone_turn_shared_on_the_host_and_the_card(tmp_path, monkeypatch):
    card, host = Turns("card", tmp_path), Turns(turns.HOST_KEY, tmp_path)
    monkeypatch.setattr(turns, "for_device", lambda device: card)
    monkeypatch.setattr(turns, "_HOST", [host])
    with turns.host_alone("cuda"):
        others = [_holder(tmp_path, "sharing", 0, key=k, wait=False) for k in ("card", turns.HOST_KEY)]
        time.sleep(0.5)
        assert all(o.poll() is None for o in others)
        turns.share_now("cuda")
        for o in others:
            assert o.stdout.readline().startswith("in")
            o.wait()


def test_turns_nest_within_a_process_and_never_upgrade(tmp_path):
    t = Turns("card", tmp_path)
    with t.alone():
        with t.alone():                # a ceiling re-measured inside a timed shape
            with t.sharing():
                pass
    with t.sharing():
        with pytest.raises(RuntimeError, match="harness bug"):
            with t.alone():
                pass


def test_a_lock_never_let_go_is_a_harness_error_naming_its_holder(tmp_path, monkeypatch):
    other = _holder(tmp_path, "alone", 30)
    monkeypatch.setenv("GAUNTLET_TURN_WAIT_S", "0.5")
    try:
        with pytest.raises(TurnTimeout, match=rf"harness error.*{other.pid}.*not a verdict"):
            with Turns("card", tmp_path).sharing():
                pass
    finally:
        other.kill()
        other.wait()
    with Turns("card", tmp_path).alone():        # the kernel dropped the dead holder's lock
        pass


def test_a_turn_alone_stepping_aside_still_gives_up_at_the_wait_limit(tmp_path, monkeypatch):
    """Turns._drain's steps count toward GAUNTLET_TURN_WAIT_S: a call in flight that never ends is a harness error
    after the limit, not after the limit plus the 30 s of steps."""
    other = _holder(tmp_path, "sharing", 30)
    monkeypatch.setenv("GAUNTLET_TURN_WAIT_S", "1")
    t0 = time.monotonic()
    try:
        with pytest.raises(TurnTimeout, match=rf"harness error.*{other.pid}"):
            with Turns("card", tmp_path).alone():
                pass
    finally:
        other.kill()
        other.wait()
    assert time.monotonic() - t0 < 1.0 + turns.STEP_EVERY_S + 1.0


def test_other_judges_are_counted_while_they_live(tmp_path):
    mine = Turns("card", tmp_path)
    with mine.sharing():
        pass
    assert mine.others() == 0
    other = _holder(tmp_path, "sharing", 30)
    try:
        assert mine.others() == 1
    finally:
        other.kill()
        other.wait()
    assert mine.others() == 0                    # a dead judge's entry is cleared


def test_no_lock_folder_means_one_judge(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    t = Turns("card", blocker / "sub")            # cannot be made: a file is in the way
    with t.alone():
        pass
    assert t.others() == 0


# -- the timing's answer to a busy GPU -------------------------------------------------------------------------
class _Judge:
    device = "cuda"


class _Spec:
    name = "bfloat16"


def _busy_shape(calls):
    from gauntlet.reasons import Reason

    def fake(judge, spec, shape, opts, record):
        calls.append(shape)
        return {"dtype": spec.name, "shape": shape, "baselines": {}}, [Reason("background_work", "busy")], True, None
    return fake


def test_a_busy_gpu_alone_on_the_card_is_the_candidates_background_work(monkeypatch):
    calls = []
    monkeypatch.setattr(timed, "_time_shape", _busy_shape(calls))
    monkeypatch.setattr(turns, "others", lambda device: 0)
    entry, reasons = timed._time_shape_alone(_Judge(), _Spec(), {"M": 1}, None, None)
    assert len(calls) == 1 and [r.code for r in reasons] == ["background_work"]


def test_a_busy_gpu_shared_with_other_judges_is_retimed_then_left_without_figure_or_verdict(monkeypatch):
    calls = []
    monkeypatch.setattr(timed, "_time_shape", _busy_shape(calls))
    monkeypatch.setattr(turns, "others", lambda device: 2)
    entry, reasons = timed._time_shape_alone(_Judge(), _Spec(), {"M": 1}, None, None)
    assert len(calls) == 2 and reasons == []
    assert "another judge" in entry["baseline_errors"]["shared_gpu"] and entry["baselines"] == {}


# --- memory: a call pushed out by other judges is not the candidate's crash ------------------------------------------

def _judge_with_calls(monkeypatch, outcomes: list, others: int) -> tuple:
    """A Judge whose correctness calls return (or raise) `outcomes` in turn, with `others` other judges on the card;
    returns (judge, the turn each call ran in)."""
    from types import SimpleNamespace

    from gauntlet.judge import calls
    modes: list = []
    turn = _recording(modes)

    def fake_call(self, shape, spec, seed):
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(turns, "sharing", turn("sharing"))
    monkeypatch.setattr(turns, "alone", turn("alone"))
    monkeypatch.setattr(turns, "others", lambda device: others)
    monkeypatch.setattr(calls.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(calls.time, "sleep", lambda s: None)
    monkeypatch.setattr(calls.Judge, "_run_call", fake_call)
    judge = calls.Judge(problem=SimpleNamespace(calls_per_case=2), child=None, device="cuda")
    return judge, modes


def _crash(detail):
    from gauntlet.judge.calls import Abort
    from gauntlet.reasons import Reason
    return Abort(Reason("crash", detail))


OOM = "Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.45 GiB."


def test_a_call_out_of_memory_beside_other_judges_is_made_again_alone(monkeypatch):
    judge, modes = _judge_with_calls(monkeypatch, [_crash(OOM), []], others=2)
    assert judge.run_call({"M": 1}, None, 0) == [] and modes == ["sharing", "alone"]
    # the judge's own shortage too
    judge, modes = _judge_with_calls(monkeypatch, [_crash("the judge ran out of GPU memory while ..."), []], others=1)
    assert judge.run_call({"M": 1}, None, 0) == [] and modes == ["sharing", "alone"]


@pytest.mark.parametrize("others,starts,verdict_reasons", [(2, 2, []), (0, 1, ["crash"])])
def test_a_worker_start_out_of_memory_beside_other_judges_is_made_once_more(monkeypatch, others, starts,
                                                                            verdict_reasons):
    """Its CUDA context could not be made: on an H100 runner (pytest -n 14) a worker crashed so while starting,
    because a fixture beside it held the card. Alone on the card the crash stays the candidate's."""
    from gauntlet.judge import evaluate
    from gauntlet.judge.process.isolate import ChildFailed
    from gauntlet.judge.records.results import EvalRecord
    from gauntlet.reasons import Reason
    made = []

    class FakeChild:
        def __init__(self, *args, **kw):
            made.append(self)
            self.hello, self.confinement = None, None

        def finish_start(self):
            if len(made) == 1:
                raise ChildFailed(Reason("crash", "while starting: torch.AcceleratorError: CUDA error: out of memory"))
            self.hello = {"kernels": []}

    monkeypatch.setattr(evaluate, "Child", FakeChild)
    monkeypatch.setattr(evaluate, "close_all", lambda children: None)
    monkeypatch.setattr(evaluate.time, "sleep", lambda s: None)
    monkeypatch.setattr(turns, "others", lambda device: others)
    monkeypatch.setattr(turns, "sharing", lambda device: contextlib.nullcontext())
    record = EvalRecord(problem="gemm", solution="x", path="x", backend="torch", device="cuda")
    solution = SimpleNamespace(path="x", backend="torch", format=None)
    opts = SimpleNamespace(device="cuda", sandbox=None, case_timeout_s=1.0)
    judge = evaluate._start_judge(SimpleNamespace(calls_per_case=2), solution, opts, record, None)
    assert len(made) == starts and [r["code"] for r in record.reasons] == verdict_reasons
    assert (judge is not None) == (not verdict_reasons)


def test_out_of_memory_alone_or_twice_and_other_crashes_stay_the_candidates(monkeypatch):
    from gauntlet.judge.calls import Abort
    for outcomes, others, want_modes in (([_crash(OOM)], 0, ["sharing"]),                 # alone on the card
                                         ([_crash(OOM), _crash(OOM)], 3, ["sharing", "alone"]),   # again alone
                                         ([_crash("ZeroDivisionError")], 3, ["sharing"])):       # not memory
        judge, modes = _judge_with_calls(monkeypatch, outcomes, others)
        with pytest.raises(Abort) as info:
            judge.run_call({"M": 1}, None, 0)
        assert info.value.reason.code == "crash" and modes == want_modes


@pytest.mark.parametrize("side", ["candidate", "baseline"])
@pytest.mark.parametrize("others,alive,detail,tries,raised", [
    (1, True, OOM, 2, False),                 # crowded out beside another judge: timed once more, and it stands
    (1, True, OOM * 9, 4, True),              # crowded out every time: tried after each pause, then it stands
    (0, True, OOM, 1, True),                  # alone on the card: its own shortage (the candidate's crash)
    (1, True, "ZeroDivisionError", 1, True),  # not memory
    (1, False, OOM, 1, True),                 # its worker is gone: nothing to time again
])
def test_a_timed_shape_out_of_memory_beside_other_judges_is_timed_once_more(monkeypatch, side, others, alive, detail,
                                                                            tries, raised):
    """A benchmark shape's inputs are fixed, not sized to the judge's share: on an H100 with --overlap 2, both fp8
    rowwise solutions lost their figures (and their verdicts) when their worker ran out of memory building
    N=53248, K=16384 beside another judge's correctness case; with 4 judges, the baseline worker's cuBLAS ran out
    timing attn_scores' fp32 shape, and the shape lost its figure."""
    from gauntlet.judge.process.isolate import ChildFailed
    from gauntlet.judge.timing.bench import BaselineFailed
    from gauntlet.reasons import Reason
    seen = []
    failure = (lambda: ChildFailed(Reason("crash", f"while timing: {detail}"))) if side == "candidate" else \
        (lambda: BaselineFailed(f"Traceback (most recent call last): ... {detail}"))

    def shape(judge, spec, shape, opts, record):
        seen.append(shape)
        if len(seen) == 1 or detail == OOM * 9:
            raise failure()
        return {"dtype": spec.name, "shape": shape, "baselines": {}}, []
    monkeypatch.setattr(timed, "_time_shape_alone", shape)
    monkeypatch.setattr(turns, "others", lambda device: others)
    monkeypatch.setattr(timed.torch.cuda, "empty_cache", lambda: None)
    slept = []
    monkeypatch.setattr(timed.time, "sleep", slept.append)
    judge = _Judge()
    judge.child = SimpleNamespace(alive=alive if side == "candidate" else True)
    judge.base = SimpleNamespace(alive=alive if side == "baseline" else True)
    if raised:
        with pytest.raises(ChildFailed if side == "candidate" else BaselineFailed):
            timed._time_shape_retried(judge, _Spec(), {"M": 1}, None, None)
    else:
        entry, reasons = timed._time_shape_retried(judge, _Spec(), {"M": 1}, None, None)
        assert reasons == [] and entry["shape"] == {"M": 1}
    assert len(seen) == tries and slept == list(timed.CROWDED_WAITS_S[:tries - 1])


def test_a_judge_sharing_the_card_hands_its_reserve_back_after_every_call_and_its_cases_after_correctness(
        monkeypatch):
    from gauntlet.judge import calls
    emptied = []
    judge, modes = _judge_with_calls(monkeypatch, [[], []], others=1)
    monkeypatch.setattr(calls.torch.cuda, "empty_cache", lambda: emptied.append(1))
    monkeypatch.setenv("GAUNTLET_JUDGES_PER_GPU", "1")
    judge.run_call({"M": 1}, None, 0)
    assert emptied == []                       # alone: the reserve is kept from call to call
    monkeypatch.setenv("GAUNTLET_JUDGES_PER_GPU", "2")
    judge.run_call({"M": 1}, None, 0)
    assert emptied == [1]
    judge.history.append(("key", "expectation"))
    judge.release()
    assert not judge.history and emptied == [1, 1]


# --- the record says when and on which card each shape was timed: one timing per card, checked from records ----------

def test_a_timed_entry_carries_its_card_and_the_span_it_held_the_card_alone(monkeypatch):
    import contextlib
    import time
    held = []

    @contextlib.contextmanager
    def alone(device):
        held.append(time.time())
        yield
        held.append(time.time())

    def shape(judge, spec, shape, opts, record):
        time.sleep(0.02)
        return {"dtype": spec.name, "shape": shape, "baselines": {}}, [], False, None
    monkeypatch.setattr(timed, "_time_shape", shape)
    monkeypatch.setattr(turns, "alone", alone)
    monkeypatch.setattr(turns, "card", lambda device: "GPU-1234")
    entry, reasons = timed._time_shape_alone(_Judge(), _Spec(), {"M": 1}, None, None)
    span = entry["alone"]
    assert span["card"] == "GPU-1234" and reasons == []
    assert held[0] - 0.001 <= span["from"] and span["until"] <= held[1] + 0.001     # inside the lock's hold
    assert span["until"] - span["from"] >= 0.015


def _rec(rid, *spans):
    return {"id": rid, "timings": [{"dtype": "bfloat16", "shape": {"M": i},
                                    "alone": {"card": card, "from": a, "until": b}}
                                   for i, (card, a, b) in enumerate(spans)]}


def test_timed_together_finds_two_candidates_timed_on_one_card_at_once_and_nothing_else():
    from gauntlet.executors.exclusive import timed_together
    apart = [_rec("a", ("G0", 0.0, 1.0), ("G0", 1.0, 2.0)),        # one record's shapes back to back
             _rec("b", ("G0", 2.0, 3.0)),                          # the next candidate after it
             _rec("c", ("G1", 0.5, 2.5))]                          # another card at the same time
    assert timed_together(apart) == []
    clash = apart + [_rec("d", ("G0", 2.9, 4.0))]
    found = timed_together(clash)
    assert len(found) == 1 and found[0]["card"] == "G0"
    assert found[0]["first"].startswith("b ") and found[0]["second"].startswith("d ")
    assert abs(found[0]["overlap_s"] - 0.1) < 1e-9
    assert timed_together([{"id": "x", "timings": [{"dtype": "f", "shape": {}}]}]) == []   # no span: nothing to say


def test_the_eval_many_summary_on_cuda_counts_candidates_timed_together():
    from gauntlet.executors import many
    run = many.Run(2, "cuda", gpus=1)
    for i, rec in enumerate([_rec("a", ("G0", 0.0, 1.0)), _rec("b", ("G0", 0.5, 1.5))]):
        many._done(run, None, 2, {}, dict(rec, index=i, verdict="pass", resumed=False, wall_s=1.0))
    assert run.summary()["summary"]["timed_together"] == 1
    assert "timed_together" not in many.Run(1, "cpu").summary()["summary"]


# --- the host: a shape the busy host starved is timed again with the host to this judge alone ----------------------

def _starved_entry(starved: int, shift: float | None = 0.001):
    """A timing entry whose candidate had `starved` of 40 calls starved; `shift`: how far they moved its median
    (gauntlet.judge.timing.starved.starved_shift; None when most calls were starved)."""
    return {"dtype": "bfloat16", "shape": {"M": 1}, "candidate_ms": 0.2, "starved_calls": [starved, 40],
            "starved_shift": None if starved >= 20 else shift,
            "baselines": {"cublas": {"ms": 0.19, "starved_calls": [0, 40], "starved_shift": 0.0}}}


class _Pending:
    """Stands in for gauntlet.judge.timing.spots.Pending: logs what became of a timed attempt's spot checks."""

    def __init__(self, log: list):
        self.log = log

    def fetch(self):
        self.log.append("fetch")

    def settle(self):
        self.log.append("settle")
        return []

    def drop(self):
        self.log.append("drop")


def _turn_log(monkeypatch, host_others: int, starved: list, shift: float = 0.001):
    log: list = []
    turn = _recording(log)

    def shape(judge, spec, shape, opts, record):
        return _starved_entry(starved.pop(0), shift), [], False, _Pending(log)
    monkeypatch.setattr(timed, "_time_shape", shape)
    monkeypatch.setattr(turns, "alone", turn("alone"))
    monkeypatch.setattr(turns, "host_alone", turn("host_alone"))
    monkeypatch.setattr(turns, "share_now", lambda device: log.append("share"))
    monkeypatch.setattr(turns, "card", lambda device: "GPU-1")
    monkeypatch.setattr(turns, "others", lambda device: 0)
    monkeypatch.setattr(turns, "host_others", lambda device: host_others)
    return log


def test_a_shape_starved_while_other_judges_share_the_host_is_timed_again_with_the_host_alone(monkeypatch):
    log = _turn_log(monkeypatch, host_others=3, starved=[30, 30])
    entry, reasons = timed._time_shape_alone(_Judge(), _Spec(), {"M": 1}, None, None)
    # the busy host's attempt is dropped unchecked; the quiet host's figure stands, and is spot-checked after its turn
    assert log == ["alone", "drop", "host_alone", "share", "fetch", "settle"] and reasons == []
    assert entry["host_alone"] is True and entry["starved_calls"] == [30, 40]


def test_a_starved_shape_alone_on_the_host_or_a_clean_one_is_not_timed_again(monkeypatch):
    log = _turn_log(monkeypatch, host_others=0, starved=[30])          # nobody else: the launch is the side's own
    entry, _ = timed._time_shape_alone(_Judge(), _Spec(), {"M": 1}, None, None)
    assert log == ["alone", "share", "fetch", "settle"] and "host_alone" not in entry
    # 8 of 40 (a batch's first call, say) that moved the median by 0.1%: the figure is the GPU's, not the host's
    log = _turn_log(monkeypatch, host_others=3, starved=[8], shift=0.001)
    entry, _ = timed._time_shape_alone(_Judge(), _Spec(), {"M": 1}, None, None)
    assert log == ["alone", "share", "fetch", "settle"] and not timed.host_starved(entry)


def test_a_few_starved_calls_that_moved_the_median_send_the_shape_to_a_quiet_host(monkeypatch):
    log = _turn_log(monkeypatch, host_others=3, starved=[8, 8], shift=timed.HOST_SHIFT * 2)
    entry, _ = timed._time_shape_alone(_Judge(), _Spec(), {"M": 1}, None, None)
    assert log == ["alone", "drop", "host_alone", "share", "fetch", "settle"] and entry["host_alone"] is True


def test_a_side_starved_with_the_host_quiet_sends_the_judgements_later_shapes_straight_to_a_quiet_host(monkeypatch):
    judge = _Judge()
    log = _turn_log(monkeypatch, host_others=3, starved=[30, 30, 30])      # host-bound by design: every call
    timed._time_shape_alone(judge, _Spec(), {"M": 1}, None, None)
    assert log == ["alone", "drop", "host_alone", "share", "fetch", "settle"] and judge.host_bound
    entry, _ = timed._time_shape_alone(judge, _Spec(), {"M": 2}, None, None)
    # timed once, not twice
    assert log[6:] == ["host_alone", "share", "fetch", "settle"] and entry["host_alone"] is True


def test_a_starved_baseline_also_sends_the_shape_back_to_a_quiet_host():
    entry = _starved_entry(0)
    entry["baselines"]["cublas"].update(starved_calls=[20, 40], starved_shift=None)   # its median a starved call
    assert timed.host_starved(entry)


def test_host_alone_waits_for_another_cards_correctness_call_and_holds_off_new_ones(tmp_path, monkeypatch):
    # Another card's judge in a correctness call holds the host shared (as turns.sharing takes it after its card).
    other = _holder(tmp_path, "sharing", 1.5, key="host")
    monkeypatch.setattr(turns, "_HOST", [Turns("host", tmp_path)])
    t0 = time.monotonic()
    with turns._with_host(Turns("card-A", tmp_path).alone(), "alone"):
        waited = time.monotonic() - t0
        late = _holder(tmp_path, "sharing", 0, key="host", wait=False)   # a new correctness call on card B
        time.sleep(1.0)
        released = time.monotonic()
    entered = float(late.stdout.readline().split()[1])
    late.wait()
    other.wait()
    assert waited > 1.0 and entered >= released - 0.05


def test_timing_on_two_cards_shares_the_host(tmp_path, monkeypatch):
    other = _holder(tmp_path, "sharing", 2.0, key="host")        # card B's timing: alone on B, the host shared
    monkeypatch.setattr(turns, "_HOST", [Turns("host", tmp_path)])
    t0 = time.monotonic()
    with turns._with_host(Turns("card-A", tmp_path).alone(), "shared"):
        waited = time.monotonic() - t0
    other.wait()
    assert waited < 1.0


STRESS = textwrap.dedent("""
    import random, sys, time
    sys.path.insert(0, {root!r})
    from gauntlet.judge.timing import turns
    from gauntlet.judge.timing.turns import Turns
    folder, card, seed = {folder!r}, sys.argv[1], int(sys.argv[2])
    turns._HOST[:] = [Turns("host", folder)]
    mine = Turns(card, folder)
    rng = random.Random(seed)
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        mode = rng.choice(["shared", "shared", "alone", "host_alone"])
        turn = mine.sharing() if mode == "shared" else mine.alone()
        with turns._with_host(turn, "alone" if mode == "host_alone" else "shared"):
            t0 = time.time()
            time.sleep(rng.uniform(0.001, 0.02))
            print(mode, card, t0, time.time(), flush=True)
""")


def test_turns_on_two_cards_and_the_host_never_deadlock_and_keep_their_promises(tmp_path):
    """Four judges on two cards take random turns for a few seconds: all finish, no two timings overlap on one card,
    nothing overlaps a correctness call on its card, and nothing at all overlaps a host_alone turn."""
    procs = [subprocess.Popen([sys.executable, "-c", STRESS.format(root=str(ROOT), folder=str(tmp_path)), card,
                               str(seed)], stdout=subprocess.PIPE, text=True)
             for seed, card in enumerate(["A", "A", "B", "B"])]
    spans = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        spans += [(m, c, float(a), float(b)) for m, c, a, b in (line.split() for line in out.splitlines())]
    assert {m for m, *_ in spans} == {"shared", "alone", "host_alone"}

    def overlap(x, y):
        return x[2] < y[3] and y[2] < x[3]
    for i, x in enumerate(spans):
        for y in spans[i + 1:]:
            if not overlap(x, y):
                continue
            assert "host_alone" not in (x[0], y[0]), (x, y)
            if x[1] == y[1]:
                assert x[0] == y[0] == "shared", (x, y)


def test_back_to_back_timings_on_one_card_are_not_called_together_and_a_malformed_span_is_ignored():
    from gauntlet.executors.exclusive import timed_together
    a = _rec("a", ("G0", 100.000001, 100.250000))
    b = _rec("b", ("G0", 100.250001, 100.5))          # the next judge stamped its start 1 us after this one let go
    assert timed_together([a, b]) == []
    broken = {"id": "c", "timings": [{"dtype": "f", "shape": {}, "alone": {"card": "G0", "from": 100.3}}]}
    assert timed_together([a, b, broken]) == []


def test_the_answer_built_for_a_timed_shapes_size_is_handed_back_before_the_workers_build_their_inputs(monkeypatch):
    """On an H100, fp8_gemm_rowwise's N=53248, K=16384 answer (fp64, every convention) stayed in the judge's
    allocator reserve, 38 GB, while both workers built their timing inputs: beside another judge they ran out of
    memory. The reserve is handed back after the probe, and again however the shape ends."""
    events = []

    class FakeSchedule:
        def __init__(self, *args, **kw):
            self.reasons, self.samples = [], {}

        def run(self, budget):
            events.append("workers build their inputs")
            raise RuntimeError("the candidate's worker died")

        def end(self):
            events.append("end")

    probe = SimpleNamespace(oracle=SimpleNamespace(numel=lambda: 16))
    monkeypatch.setattr(timed, "_probe", lambda judge, shape, spec: probe)
    monkeypatch.setattr(timed, "TimedOutputs", lambda *args: None)      # no outputs: the schedule is a fake
    monkeypatch.setattr(timed, "Schedule", FakeSchedule)
    monkeypatch.setattr(timed.torch.cuda, "empty_cache", lambda: events.append("empty_cache"))
    judge = SimpleNamespace(device="cuda", problem=SimpleNamespace(baselines={"cublas": None}), child=None,
                            base=None, declared=frozenset(), custom=True)
    opts = SimpleNamespace(case_timeout_s=1.0, timing_budget_s=1.0)
    with pytest.raises(RuntimeError):
        timed._time_shape(judge, _Spec(), {"M": 1}, opts, SimpleNamespace(seed=0))
    assert events == ["empty_cache", "workers build their inputs", "end", "empty_cache"]


# --- the spot checks: after the turn alone, with the card shared --------------------------------------------------

turns_held: list = []      # the turns the fakes below are inside, innermost last


def _fake_turn(name: str):
    @contextlib.contextmanager
    def cm(device):
        turns_held.append(name)
        try:
            yield
        finally:
            turns_held.pop()
    return cm


def test_a_standing_figure_is_fetched_in_its_own_turn_made_shared_and_judged_after_it(monkeypatch):
    """The spots need no quiet card (judged inside the turn alone they would be a large share of the time a suite
    holds the card alone, while the other judges wait): the turn is made shared, the spots are
    fetched and the workers' buffers let go in it, and they are judged after it."""
    log: list = []

    @contextlib.contextmanager
    def alone(device):
        log.append("alone")
        yield
        log.append("/alone")

    monkeypatch.setattr(timed, "_time_shape", lambda *a: ({"dtype": "bfloat16", "shape": {}, "baselines": {}}, [],
                                                          False, _Pending(log)))
    monkeypatch.setattr(turns, "alone", alone)
    monkeypatch.setattr(turns, "share_now", lambda device: log.append("share"))
    monkeypatch.setattr(turns, "card", lambda device: "GPU-1")
    monkeypatch.setattr(turns, "host_others", lambda device: 0)
    timed._time_shape_alone(_Judge(), _Spec(), {"M": 1}, None, None)
    assert log == ["alone", "share", "fetch", "/alone", "settle"]


class _SpotSchedule:
    """A schedule whose rounds are over: what spots.Pending does with it, and in which turn."""

    def __init__(self, log: list, calls: int = 5, fail: bool = False):
        import random

        from gauntlet.judge.timing.figures import Phases
        self.log, self.calls, self.fail = log, calls, fail
        self.spots, self.reasons, self.phases = [], [], Phases()
        self.outside = {}                # no outside-clock spans (gauntlet.judge.timing.outside)
        self.rng = random.SystemRandom()

    def _spot(self, index):
        self.log.append(("fetch", index, turns_held[-1] if turns_held else None))
        if self.fail:
            raise RuntimeError("the candidate's worker died returning its output")
        return {"seed": 1, "meta": {}}, []

    def end(self):
        self.log.append("end")

    def second_clock(self, figs):
        self.log.append("second clock")
        return []


def _pending(monkeypatch, log, fits=True, oom=0, others=3, **kw):
    """A spots.Pending over a _SpotSchedule, with sharing()/alone() faked; `oom`: how many spot judgements run out of
    GPU memory first."""
    from gauntlet.judge.timing import peaks, spots
    left = [oom]

    def judged(judge, spec, shape, found, record):
        log.append(("judged", [i for i, _, _ in found], turns_held[-1] if turns_held else None))
        if left[0]:
            left[0] -= 1
            raise torch.OutOfMemoryError("CUDA out of memory")
        return []
    import torch
    monkeypatch.setattr(turns, "sharing", _fake_turn("sharing"))
    monkeypatch.setattr(turns, "alone", _fake_turn("alone"))
    monkeypatch.setattr(turns, "others", lambda device: others)
    monkeypatch.setattr(spots.torch.cuda, "empty_cache", lambda: log.append("empty_cache"))
    monkeypatch.setattr(spots, "spot_checks", judged)
    monkeypatch.setattr(spots, "_fits_share", lambda problem, shape, spec: fits)
    monkeypatch.setattr(peaks, "physics", lambda entry, ceilings, again: log.append("physics") or [])
    schedule = _SpotSchedule(log, **kw)
    judge = SimpleNamespace(device="cuda", problem=None)
    return spots.Pending(judge, _Spec(), {"M": 1}, schedule, {}, {}, SimpleNamespace(peaks={}), None), schedule


def _steps(log):
    return [e[0] if isinstance(e, tuple) else e for e in log]


def test_the_pending_spots_are_fetched_then_the_workers_let_go_then_judged_with_the_card_shared(monkeypatch):
    from gauntlet.judge.timing.bench import SPOTS
    log: list = []
    pending, _ = _pending(monkeypatch, log)
    pending.fetch()
    fetched = [e for e in log if e[0] == "fetch"]
    assert len(fetched) == SPOTS and len({e[1] for e in fetched}) == SPOTS          # two distinct calls
    assert _steps(log) == ["fetch"] * SPOTS + ["end", "empty_cache"]
    pending.settle()
    assert _steps(log)[SPOTS + 2:] == ["judged", "physics", "second clock"]
    judged = log[SPOTS + 2]
    assert judged[2] == "sharing" and sorted(judged[1]) == sorted(e[1] for e in fetched)
    assert "spot_checks" in pending.entry["phases_s"] and not turns_held


def test_a_spot_whose_answer_outgrows_the_share_or_runs_out_of_memory_shared_is_judged_alone(monkeypatch):
    log: list = []
    pending, _ = _pending(monkeypatch, log, fits=False)
    pending.fetch()
    pending.settle()
    assert [e[2] for e in log if e[0] == "judged"] == ["alone"]
    log.clear()
    from gauntlet.judge.timing import spots
    pauses: list = []
    monkeypatch.setattr(spots.time, "sleep", pauses.append)
    pending, _ = _pending(monkeypatch, log, oom=1)                  # pushed out by the other judges' calls
    pending.fetch()
    pending.settle()
    assert [e[2] for e in log if e[0] == "judged"] == ["sharing", "alone"]
    assert pauses == [1.0]                  # a second for a hoarding worker's watchdog, as a correctness call waits
    log.clear()
    pending, _ = _pending(monkeypatch, log, oom=1, others=0)        # alone on the card: its own shortage
    pending.fetch()
    with pytest.raises(Exception, match="out of memory"):
        pending.settle()
    assert not turns_held


def test_a_malformed_spot_reply_while_fetching_is_the_verdict_not_lost(monkeypatch):
    """Schedule._spot records a malformed reply as `tampering` in the schedule's reasons and keeps an empty spot:
    fetched after the rounds, that reason must still reach the record (no spot is judged, none could be)."""
    from gauntlet.reasons import Reason
    log: list = []
    pending, schedule = _pending(monkeypatch, log)

    def malformed(index):
        schedule.reasons.append(Reason("tampering", "malformed timing reply from the candidate's process"))
        return {}, []
    schedule._spot = malformed
    pending.fetch()
    reasons = pending.settle()
    assert [r.code for r in reasons] == ["tampering"]
    assert "judged" not in _steps(log) and log[-2:] == ["end", "empty_cache"]


def test_a_worker_that_fails_returning_a_spot_still_has_its_timing_buffers_released(monkeypatch):
    log: list = []
    pending, _ = _pending(monkeypatch, log, fail=True)
    with pytest.raises(RuntimeError, match="returning its output"):
        pending.fetch()
    assert log[-2:] == ["end", "empty_cache"]


def test_a_timed_shape_runs_its_rounds_alone_and_its_spots_shared_through_the_real_path(monkeypatch):
    """timed._time_shape_alone over the real _time_shape: the rounds inside the turn alone; the turn made shared, the
    spots fetched and the workers' buffers let go in it; the spots judged after it, with the card shared; a shape
    the judge could not build an answer for is a crash with nothing pending."""
    log: list = []

    class Schedule(_SpotSchedule):
        def __init__(self, *args, **kw):
            super().__init__(log)
            self.samples, self.busy_gpu = {}, False

        def run(self, budget):
            log.append(("rounds", turns_held[-1] if turns_held else None))
            self.samples = {"candidate": [1.0]}

        def figures(self):
            return {}

    def share_now(device):
        log.append("share")
        turns_held[-1] = "alone, made shared"
    _pending(monkeypatch, log)                # the fake sharing()/alone(), spot judgements and physics
    monkeypatch.setattr(turns, "share_now", share_now)
    monkeypatch.setattr(turns, "card", lambda device: "GPU-1")
    monkeypatch.setattr(turns, "host_others", lambda device: 0)
    monkeypatch.setattr(timed, "Schedule", Schedule)
    monkeypatch.setattr(timed, "_entry", lambda *a: {"dtype": "bfloat16", "shape": {}, "baselines": {}})
    probe = SimpleNamespace(oracle=SimpleNamespace(numel=lambda: 16))
    monkeypatch.setattr(timed, "_probe", lambda judge, shape, spec: probe)
    monkeypatch.setattr(timed, "TimedOutputs", lambda *args: None)      # no outputs: the schedule is a fake
    judge = SimpleNamespace(device="cuda", problem=SimpleNamespace(baselines={"cublas": None}), child=None,
                            base=None, declared=frozenset(), custom=True)
    opts = SimpleNamespace(case_timeout_s=1.0, timing_budget_s=1.0, peaks={})
    entry, reasons = timed._time_shape_alone(judge, _Spec(), {"M": 1}, opts, SimpleNamespace(seed=0))
    assert reasons == [] and "alone" in entry and "spot_checks" in entry["phases_s"]
    # (the judge's reserve handed back after its probe and as its shape ends, the workers' once the spots are fetched)
    assert _steps(log) == ["empty_cache", "rounds", "empty_cache", "share", "fetch", "fetch", "end", "empty_cache",
                           "judged", "physics", "second clock"]
    where = {e[0] + str(i): e[-1] for i, e in enumerate(log) if isinstance(e, tuple)}
    assert where == {"rounds1": "alone", "fetch4": "alone, made shared", "fetch5": "alone, made shared",
                     "judged8": "sharing"} and not turns_held
    monkeypatch.setattr(timed, "_probe", lambda judge, shape, spec: None)
    entry, reasons = timed._time_shape_alone(judge, _Spec(), {"M": 1}, opts, SimpleNamespace(seed=0))
    assert [r.code for r in reasons] == ["crash"] and entry["baselines"] == {}
