"""Workers started ahead of need (gauntlet.judge.process.standby) and K judges per GPU (--overlap): what is kept, what
is never kept, and that overlapping judges still judge each candidate on its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gauntlet import executors
from gauntlet.judge.process import standby

ROOT = Path(__file__).resolve().parents[1]
CONFINED = {"verified": True, "signals": "own domain only"}


class FakeChild:
    def __init__(self, hello=True, confinement=None, alive=True, gated=False):
        self.hello = {"ok": True} if hello else None
        self.confinement = confinement
        self.alive, self.gated, self.closed = alive, gated, False
        self.proc = SimpleNamespace(poll=lambda: None if self.alive else 1)
        self.budget = None

    def close(self):
        self.closed, self.alive = True, False


@pytest.fixture
def on(monkeypatch):
    monkeypatch.setattr(standby, "_ON", True)
    monkeypatch.setattr(standby, "_NEXT", {})
    monkeypatch.setattr(standby, "_BASE", {})
    import gauntlet.judge.process.isolate as isolate
    monkeypatch.setattr(isolate, "close_all", lambda children: [c.close() for c in children if c is not None])
    return standby


PROBLEM = SimpleNamespace(id="gemm")
OPTS = SimpleNamespace(device="cuda", sandbox="auto")


def test_a_baseline_is_kept_only_beside_confined_candidates(on):
    base = FakeChild()
    assert not on.keep_baseline(base, PROBLEM, OPTS, [FakeChild(confinement={"verified": False})])
    assert not on.keep_baseline(base, PROBLEM, OPTS, [FakeChild(confinement=None)])   # died before its hello
    assert not on.keep_baseline(base, PROBLEM, OPTS, [FakeChild(confinement=CONFINED),
                                                      FakeChild(confinement={"verified": True, "signals": "any"})])
    assert on.take_baseline(PROBLEM, OPTS) is None
    assert on.keep_baseline(base, PROBLEM, OPTS, [FakeChild(confinement=CONFINED)])
    assert on.take_baseline(PROBLEM, OPTS) is base
    assert on.take_baseline(PROBLEM, OPTS) is None          # taken: one judgement at a time uses it


def test_a_dead_baseline_is_not_handed_out_and_only_one_is_kept(on):
    first, second = FakeChild(), FakeChild()
    assert on.keep_baseline(first, PROBLEM, OPTS, [])
    assert on.keep_baseline(second, SimpleNamespace(id="bmm"), OPTS, [])
    assert first.closed                                    # each kept one holds a CUDA context: one at a time
    second.alive = False
    assert on.take_baseline(SimpleNamespace(id="bmm"), OPTS) is None and second.closed


def test_nothing_is_kept_when_off(monkeypatch):
    monkeypatch.setattr(standby, "_ON", False)
    assert not standby.keep_baseline(FakeChild(), PROBLEM, OPTS, [])


def test_a_prestarted_worker_is_handed_to_its_own_candidate_only(on):
    sol = SimpleNamespace(path=Path("/x/a.py"), backend="triton", format="native", error=None, unsupported=None)
    other = SimpleNamespace(path=Path("/x/b.py"), backend="triton", format="native", error=None, unsupported=None)
    child = FakeChild(hello=False, gated=True)
    on._NEXT[on._candidate_key(PROBLEM, sol, OPTS)] = child
    assert on.take_candidate(PROBLEM, other, OPTS, "budget") is None
    got = on.take_candidate(PROBLEM, sol, OPTS, "budget")
    assert got is child and got.budget == "budget"
    dead = FakeChild(hello=False, gated=True, alive=False)
    on._NEXT[on._candidate_key(PROBLEM, sol, OPTS)] = dead
    assert on.take_candidate(PROBLEM, sol, OPTS, "budget") is None and dead.closed


def test_no_prestart_on_the_cpu_or_for_a_broken_file(on, monkeypatch):
    import gauntlet.judge.process.isolate as isolate
    monkeypatch.setattr(isolate, "Child", lambda *a, **k: pytest.fail("no worker should start"))
    sol = SimpleNamespace(path=Path("/x/a.py"), backend="triton", format="native", error=None, unsupported=None)
    on.prestart(PROBLEM, sol, SimpleNamespace(device="cpu", sandbox="auto"))
    on.prestart(PROBLEM, SimpleNamespace(**dict(vars(sol), error="SyntaxError")), OPTS)
    assert on._NEXT == {}


def test_overlap_puts_k_slots_on_each_gpu_with_their_share_of_memory(monkeypatch):
    monkeypatch.delenv("GAUNTLET_JUDGES_PER_GPU", raising=False)
    ex = executors.make("local", "cpu", "2", None, 3)
    assert ex.devices == ["0", "0", "0", "1", "1", "1"] and ex.gpus == 2
    assert executors.make("local", "cpu", None, None, 2).devices == ["0", "0"]
    with pytest.raises(ValueError, match="--overlap must be a positive"):
        executors.make("local", "cpu", None, None, 0)
    with pytest.raises(ValueError, match="--overlap is for the local executor"):
        executors.make("ray", "cpu", None, None, 2)


def test_run_on_cuda_times_the_headline_shapes_with_judges_overlapped_unless_told_otherwise():
    """`run`'s preset (gauntlet.cli.options.run_preset): on cuda the first RUN_SHAPES shapes and run_overlap's judges
    per GPU where the user gave neither; what the user gave stands; --all-shapes times every shape; nothing changes
    on the CPU (no timing there) or for Ray (a task holds a whole GPU)."""
    from gauntlet.cli import options
    h100 = (16, 1, 79.2)                # the lent H100 host: 16 cores, one 80 GB card (79.2 GiB)

    def preset(device="cuda", host=h100, **given):
        args = SimpleNamespace(**{"max_shapes": None, "all_shapes": False, "overlap": None, "executor": "local",
                                  "no_timing": False, "gpus": None, **given})
        said = options.run_preset(args, device, host)
        assert len(said) == (args.max_shapes != given.get("max_shapes")) + (args.overlap != given.get("overlap"))
        return args.max_shapes, args.overlap

    assert preset() == (options.RUN_SHAPES, 4)
    assert preset(max_shapes=3, overlap=1) == (3, 1)
    assert preset(all_shapes=True) == (None, 4)
    assert preset(executor="ray") == (options.RUN_SHAPES, None)
    assert preset(no_timing=True) == (None, 4)        # nothing timed: no shape count to choose
    assert preset("cpu") == (None, None)
    with pytest.raises(ValueError, match="--all-shapes and --max-shapes"):
        preset(all_shapes=True, max_shapes=2)
    # The count follows the host: two cores a judge, 18 GiB of the card a judge, at least one, at most four.
    assert preset(host=(32, 2, 139.8))[1] == 4          # 2 x H200, 32 cores
    assert preset(host=(6, 1, 79.2))[1] == 3            # a runner with 6 cores for its H100
    assert preset(host=(16, 4, 79.2))[1] == 2           # four cards share 16 cores
    assert preset(host=(64, 1, 39.4))[1] == 2           # a 40 GB A100
    assert preset(host=(64, 1, 22.0))[1] == 1           # a 24 GB card: one judge keeps the whole card's cases
    assert preset(host=(2, 1, None))[1] == 1            # memory unknown, two cores
    assert preset(host=(128, 1, None))[1] == options.RUN_OVERLAP_MAX


def test_run_overlap_reads_the_host_without_starting_cuda(monkeypatch):
    """The preset's host figures come from the process's CPU set, `--gpus` and the driver (NVML), not from a CUDA
    context in the parent, which would hold memory on the card for the whole run."""
    import torch

    from gauntlet import cards
    from gauntlet.cli import options

    monkeypatch.setattr(cards.CardMemory, "current", classmethod(lambda cls: None))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(12)))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    args = SimpleNamespace(gpus="all")
    assert options._host(args, "cuda") == (12, 3, None)
    args.gpus = None
    assert options._host(args, "cuda") == (12, 1, None)


def test_overlapping_judges_on_one_device_judge_each_candidate_on_its_own(tmp_path):
    """Two judges on logical GPU 0 at once: both candidates in flight together, each in its own judge and worker,
    each told it has half the card's memory; the lines in the candidates' order."""
    folder = tmp_path / "cands"
    folder.mkdir()
    says = ("import os, time\nBACKEND = 'torch'\ntime.sleep(%s)\n"
            "raise ImportError('share ' + os.environ.get('GAUNTLET_JUDGES_PER_GPU', '?') + ' device ' + "
            "os.environ.get('CUDA_VISIBLE_DEVICES', '?'))\n")
    # a's sleep outlasts any difference between the two judges' start-ups: with 4 s, 14 pytest workers on one H100
    # once started b's worker 5 s later than a's, and b ended last
    (folder / "a.py").write_text(says % 12)
    (folder / "b.py").write_text(says % 0.5)
    out = subprocess.run([sys.executable, "-m", "gauntlet", "eval-many", "gemm", str(folder), "--device", "cpu",
                          "--dtype", "float32", "--examples", "1", "--seed", "1", "--overlap", "2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "GAUNTLET_JUDGES_PER_GPU"})
    assert out.returncode == 0, out.stderr
    *lines, summary = [json.loads(x) for x in out.stdout.splitlines()]
    assert [d["id"] for d in lines] == ["a", "b"]
    where = [d["judged_by"] for d in lines]
    assert [w["device"] for w in where] == ["0", "0"] and where[0]["pid"] != where[1]["pid"]
    for d in lines:
        assert "share 2 device 0" in d["reasons"][0]["detail"]
    ends = [w["started_at"] + d["wall_s"] for w, d in zip(where, lines)]
    assert where[1]["started_at"] < ends[0] and ends[1] < ends[0]
    assert summary["summary"]["gpus"] == 1


GEMM_F32 = ("import torch\nBACKEND = 'torch'\nDTYPES = ('float32',)\n%s\n"
            "def solve(a, b):\n    return torch.matmul(a, b)\n")


def test_eval_starts_its_worker_gated_before_it_imports_torch_and_its_judgement_takes_it(tmp_path):
    """`gauntlet eval`'s candidate worker is spawned before the CLI imports torch (their start-ups overlap), gated
    (the candidate's import waits for the judgement's word), and it is that very process the judgement uses."""
    sol = tmp_path / "mine.py"
    sol.write_text(GEMM_F32 % "")
    script = f"""
import json, sys
from gauntlet.judge.process import standby
seen, taken = {{}}, []
prestart, take = standby.prestart_judgement, standby.take_candidate
def spy(problem, solution, opts, baseline):
    seen['torch_before'] = 'torch' in sys.modules
    prestart(problem, solution, opts, baseline)
    seen['spawned'] = [c.proc.pid for c in standby._NEXT.values()]
    seen['gated'] = [c.gated and c.hello is None and c.watchdog is not None for c in standby._NEXT.values()]
def taking(*a):
    child = take(*a)
    taken.append(child.proc.pid if child else None)
    return child
standby.prestart_judgement, standby.take_candidate = spy, taking
from gauntlet.cli.main import main
rc = main(['eval', 'gemm', {str(sol)!r}, '--device', 'cpu', '--examples', '1', '--json'])
print(json.dumps(dict(seen, taken=taken, rc=rc, left=len(standby._NEXT))), file=sys.stderr)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    seen = json.loads(out.stderr.strip().splitlines()[-1])
    assert json.loads(out.stdout)["verdict"] == "pass", out.stdout
    assert seen["torch_before"] is False and seen["gated"] == [True]
    assert seen["taken"] == seen["spawned"] and seen["rc"] == 0 and seen["left"] == 0


def test_a_worker_started_for_nothing_is_closed_when_gauntlet_exits(tmp_path):
    """A worker the judgement does not take (here, started for another --sandbox than the one asked for, as when
    the device is guessed wrong) is killed and its folder removed on the way out, though `gauntlet` skips the
    interpreter's teardown (gauntlet.cli.main._leave); and its verdict and one JSON object are still whole."""
    sol = tmp_path / "mine.py"
    sol.write_text(GEMM_F32 % "")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    script = f"""
import sys
from types import SimpleNamespace
from gauntlet import discover
from gauntlet.judge.process import standby
problem = discover.get_problem('gemm')
standby.prestart_judgement(problem, discover.get_solution('gemm', {str(sol)!r}),
                           SimpleNamespace(device='cpu', sandbox='off'), baseline=False)
print('PID', *[c.proc.pid for c in standby._NEXT.values()], file=sys.stderr, flush=True)
sys.argv = ['gauntlet', 'eval', 'gemm', {str(sol)!r}, '--device', 'cpu', '--examples', '1', '--json']
from gauntlet.cli.main import main
main()
raise SystemExit('main() returned: it should have ended the process')
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env=dict(os.environ, TMPDIR=str(scratch)))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["verdict"] == "pass"
    pid = int(next(line for line in out.stderr.splitlines() if line.startswith("PID")).split()[1])
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z", "X")
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("gauntlet-")]


def test_closing_a_worker_does_not_wait_for_its_exit_handlers(tmp_path):
    """Workers are killed when their judgement is done, not asked to exit: a candidate whose exit handler sleeps
    cannot make its judgement (or the next one) wait for it. With the orderly exit this waited 5 s."""
    sol = tmp_path / "slow_exit.py"
    sol.write_text(GEMM_F32 % "import atexit, time\natexit.register(time.sleep, 60)\n")
    from gauntlet import discover
    from gauntlet.judge.evaluate import Options, evaluate
    problem = discover.get_problem("gemm")
    record = evaluate(problem, discover.get_solution("gemm", str(sol)),
                      Options(device="cpu", examples=1, seed=3, max_edges=1, failures_dir=str(tmp_path / "f")))
    assert record.verdict == "pass", record.reasons
    assert record.stages_s["close"] < 3.0, record.stages_s


def test_a_usage_error_found_after_the_early_start_closes_the_workers_at_once(tmp_path):
    """`eval` starts its workers before it checks every argument; an argument refused later (here, a dtype the
    problem lacks) ends the command with its usage error, and the worker started for it is closed then, not left
    running until the process exits (a test session calls main() many times)."""
    sol = tmp_path / "mine.py"
    sol.write_text(GEMM_F32 % "")
    script = f"""
import json, os, sys
from gauntlet.judge.process import standby
spawned = []
prestart = standby.prestart_judgement
def spy(*a, **k):
    prestart(*a, **k)
    spawned.extend(c.proc.pid for c in standby._PRESTARTED)
standby.prestart_judgement = spy
from gauntlet.cli.main import main
rc = main(['eval', 'gemm', {str(sol)!r}, '--device', 'cpu', '--dtype', 'float64', '--json'])
alive = [p for p in spawned if os.path.exists(f'/proc/{{p}}')]
print(json.dumps(dict(rc=rc, left=len(standby._NEXT) + len(standby._BASE), spawned=len(spawned), alive=alive)),
      file=sys.stderr)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    seen = json.loads(out.stderr.strip().splitlines()[-1])
    assert json.loads(out.stdout)["verdict"] == "usage_error"
    assert seen == {"rc": 2, "left": 0, "spawned": 1, "alive": []}


def test_an_early_start_that_fails_is_dropped_and_the_judgement_starts_its_own(monkeypatch, tmp_path):
    """Whatever goes wrong in the early start (here, the watchdog's set-up) is not the command's error: the workers
    it spawned are closed and the judgement starts its own as it would have."""
    import gauntlet.judge.process.isolate as isolate
    from gauntlet import discover
    sol = tmp_path / "mine.py"
    sol.write_text(GEMM_F32 % "")
    monkeypatch.setattr(standby, "_NEXT", {})
    monkeypatch.setattr(standby, "_BASE", {})
    monkeypatch.setattr(standby, "_PRESTARTED", [])

    def broken(self):
        raise ValueError("no card to read")

    monkeypatch.setattr(isolate.Child, "watch", broken)
    problem = discover.get_problem("gemm")
    standby.prestart_judgement(problem, discover.get_solution("gemm", str(sol)),
                               SimpleNamespace(device="cpu", sandbox="auto"), baseline=False)
    assert standby._NEXT == {} and standby._PRESTARTED == []


def test_the_time_left_counts_what_the_judgements_in_flight_still_have_to_run():
    """gauntlet.cli.output.time_left: in steady state the work left over the slots; at the end of a run, the long
    judgements in flight, which the rate alone counts as average ones."""
    from gauntlet.cli.output import time_left
    walls = [20.0] * 30 + [150.0] * 4          # mostly short, a few long (a suite's Triton files)
    mean = sum(walls) / len(walls)
    # Nothing in flight: the waiting steps' mean work over the slots, and never less than one step.
    assert time_left(walls, [], 8, 4) == pytest.approx(8 * mean / 4)
    assert time_left(walls, [], 1, 4) == pytest.approx(mean)
    # One waiting behind four in flight: it starts when the first of them is done.
    assert time_left(walls, [10.0, 10.0, 10.0, 10.0], 1, 4) == pytest.approx(min_left(walls, 10.0) + mean)
    # Three in flight for 60 s, longer than every short step: each still has 150 - 60 s to go, however few wait.
    assert time_left(walls, [60.0, 60.0, 60.0], 0, 4) == pytest.approx(90.0)
    # One in flight past every finished step: half as long again, as a guess.
    assert time_left(walls, [200.0], 0, 4) == pytest.approx(100.0)
    # Just started: nearly a mean step each, spread over the slots with the waiting ones.
    assert time_left(walls, [0.0] * 4, 4, 4) == pytest.approx(2 * mean)


def min_left(walls, elapsed):
    longer = [w for w in walls if w > elapsed]
    return sum(longer) / len(longer) - elapsed
