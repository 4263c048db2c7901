"""Judges sharing one GPU take turns (harness.judge.turns): correctness side by side, timing alone; and what the
timing does when the GPU was busy while other judges shared the card (harness.judge.timed)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.judge import timed, turns
from harness.judge.turns import Turns, TurnTimeout

ROOT = Path(__file__).resolve().parents[1]

HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from harness.judge.turns import Turns
    t = Turns("card", {folder!r})
    with getattr(t, sys.argv[1])():
        print("in", time.monotonic(), flush=True)
        time.sleep(float(sys.argv[2]))
    print("out", time.monotonic(), flush=True)
""")


def _holder(folder: Path, mode: str, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT), folder=str(folder)), mode,
                             str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("in")          # holding now
    return proc


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
        late = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT), folder=str(tmp_path)),
                                 "sharing", "0"], stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)
        released = time.monotonic()
    entered = float(late.stdout.readline().split()[1])
    late.wait()
    other.wait()
    assert waited > 1.0
    assert entered >= released - 0.05


def test_a_waiting_timing_is_not_starved_by_a_stream_of_shared_turns(tmp_path):
    """The gate: once a judge waits for the card alone, no new correctness turn begins before it."""
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
    second = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT), folder=str(tmp_path)),
                               "sharing", "0"], stdout=subprocess.PIPE, text=True)
    second_in = float(second.stdout.readline().split()[1])
    thread.join()
    first.wait()
    second.wait()
    assert second_in > results["alone_at"]


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
    from harness.reasons import Reason

    def fake(judge, spec, shape, opts, record):
        calls.append(shape)
        return {"dtype": spec.name, "shape": shape, "baselines": {}}, [Reason("background_work", "busy")], True
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
    import contextlib
    from types import SimpleNamespace

    from harness.judge import evaluate
    modes: list = []

    def turn(mode):
        @contextlib.contextmanager
        def cm(device):
            modes.append(mode)
            yield
        return cm

    def fake_call(self, shape, spec, seed):
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(turns, "sharing", turn("sharing"))
    monkeypatch.setattr(turns, "alone", turn("alone"))
    monkeypatch.setattr(turns, "others", lambda device: others)
    monkeypatch.setattr(evaluate.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(evaluate.Judge, "_run_call", fake_call)
    judge = evaluate.Judge(problem=SimpleNamespace(calls_per_case=2), child=None, device="cuda")
    return judge, modes


def _crash(detail):
    from harness.judge.evaluate import Abort
    from harness.reasons import Reason
    return Abort(Reason("crash", detail))


OOM = "Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.45 GiB."


def test_a_call_out_of_memory_beside_other_judges_is_made_again_alone(monkeypatch):
    judge, modes = _judge_with_calls(monkeypatch, [_crash(OOM), []], others=2)
    assert judge.run_call({"M": 1}, None, 0) == [] and modes == ["sharing", "alone"]
    # the judge's own shortage too
    judge, modes = _judge_with_calls(monkeypatch, [_crash("the judge ran out of GPU memory while ..."), []], others=1)
    assert judge.run_call({"M": 1}, None, 0) == [] and modes == ["sharing", "alone"]


def test_out_of_memory_alone_or_twice_and_other_crashes_stay_the_candidates(monkeypatch):
    from harness.judge.evaluate import Abort
    for outcomes, others, want_modes in (([_crash(OOM)], 0, ["sharing"]),                 # alone on the card
                                         ([_crash(OOM), _crash(OOM)], 3, ["sharing", "alone"]),   # again alone
                                         ([_crash("ZeroDivisionError")], 3, ["sharing"])):       # not memory
        judge, modes = _judge_with_calls(monkeypatch, outcomes, others)
        with pytest.raises(Abort) as info:
            judge.run_call({"M": 1}, None, 0)
        assert info.value.reason.code == "crash" and modes == want_modes
