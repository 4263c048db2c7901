"""OS confinement of the workers (gauntlet.judge.sandbox) and the judge's bounds on them
(gauntlet.judge.process.watchdog).

The escape classes of issue 16, on this machine: tests/good/escape_attempts_all_refused.py (run by
test_corpus_extra) passes only if every way out is refused; here, the same probe unconfined shows the test can
fail, the forged-stdout fixture is run through the CLI, and each resource bound becomes a verdict naming it."""
from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from gauntlet import discover
from gauntlet.judge import sandbox
from gauntlet.judge.evaluate import Options, evaluate
from gauntlet.judge.process import environment
from gauntlet.judge.records import fingerprint
from gauntlet.judge.sandbox import seccomp

HERE = Path(__file__).parent
ROOT = HERE.parent
CONFINED = not sandbox.missing()
needs_sandbox = pytest.mark.skipif(not CONFINED, reason=f"this kernel cannot confine: {sandbox.missing()}")

# tests/bad fixtures judged here (with their own limits) rather than by test_bad_solutions' table.
FIXTURES = {"balloons_host_memory", "hoards_host_memory_in_a_memfd", "fork_bomb", "opens_many_descriptors", "fills_scratch_disk",
            "sleeps_under_the_call_limit", "kills_the_baseline_worker"}


def _judge(path: Path, **kw):
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", str(path))
    opts = dict(device="cpu", dtypes=("float32",), examples=1, max_edges=2, case_timeout_s=60.0)
    opts.update(kw)
    return evaluate(problem, solution, Options(**opts))


@needs_sandbox
def test_every_record_says_what_was_in_force():
    record = _judge(ROOT / "solutions" / "gemm" / "torch_matmul.py")
    assert record.verdict == "pass"
    conf = record.confinement["candidate"]
    assert conf["verified"] and conf["mode"] == "auto" and conf["seccomp"] and conf["landlock_abi"] >= 6
    assert conf["capabilities"] == "none" and conf["limits"]["open_files"] == 4096
    assert record.fingerprint["options"]["sandbox"] == "auto" and record.fingerprint["interpreter"]


def test_the_escape_probe_can_fail():
    """Unconfined (`--sandbox off`, root keeps its capabilities), the probe's attempts succeed and it refuses to
    import: the corpus test that expects it to pass is not a test that cannot fail."""
    record = _judge(HERE / "good" / "escape_attempts_all_refused.py", sandbox="off")
    assert record.verdict == "error" and record.reasons[0]["code"] == "import_error"
    detail = record.reasons[0]["detail"]
    assert "create a file in /dev/shm" in detail and "connect a UNIX stream socket" in detail
    for ipc in ("System V shared memory", "System V semaphore set", "System V message queue", "POSIX message queue",
                "make itself undumpable"):
        assert ipc in detail
    assert not list(Path("/dev/shm").glob("gauntlet-escape-probe-*"))       # each attempt was undone


@needs_sandbox
def test_a_forged_verdict_on_the_judges_stdout_is_refused():
    out = subprocess.run([sys.executable, "-m", "gauntlet", "eval", "gemm",
                          str(HERE / "bad" / "forges_verdict_via_judge_stdout.py"), "--device", "cpu",
                          "--dtype", "float32", "--examples", "1", "--json", "--sandbox", "require"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert out.returncode == 1 and len(lines) == 1, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    doc = json.loads(lines[0])
    assert doc["verdict"] == "fail" and [r["code"] for r in doc["reasons"]] == ["mismatch"]
    assert doc["confinement"]["candidate"]["verified"]


@needs_sandbox
def test_a_pth_file_cannot_be_planted():
    planted = [Path(d) / "zz_gauntlet_planted.pth" for d in site.getsitepackages()]
    try:
        record = _judge(HERE / "bad" / "drops_pth_into_site_packages.py")
        assert record.verdict == "fail"
        assert not any(p.exists() for p in planted)
    finally:
        for p in planted:
            p.unlink(missing_ok=True)


@pytest.mark.parametrize("name, env, kw, words", [
    ("balloons_host_memory", {"GAUNTLET_WORKER_RAM_GIB": "1.5"}, {}, "host memory limit"),
    ("hoards_host_memory_in_a_memfd", {"GAUNTLET_WORKER_RAM_GIB": "1.5"}, {}, "host memory limit"),
    ("fork_bomb", {}, {}, "process limit"),
    ("opens_many_descriptors", {}, {}, "Too many open files"),
    ("fills_scratch_disk", {"GAUNTLET_WORKER_DISK_GIB": "0.1"}, {}, "disk limit"),
    ("sleeps_under_the_call_limit", {}, {"case_timeout_s": 3.0, "time_limit_s": 12.0}, "total time limit"),
])
def test_a_resource_bound_is_a_verdict_that_names_it(name, env, kw, words, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    record = _judge(HERE / "bad" / f"{name}.py", **kw)
    assert record.verdict in ("error", "timeout"), record.reasons
    assert any(words in r["detail"] for r in record.reasons), record.reasons


def test_require_is_a_usage_error_where_the_kernel_cannot_confine(monkeypatch):
    monkeypatch.setattr(sandbox, "offered", lambda: {"landlock_abi": 3, "seccomp": True, "arch": "x86_64",
                                                     "root": True})
    with pytest.raises(sandbox.Unavailable, match="Landlock ABI >= 6"):
        sandbox.check_mode("require")
    sandbox.check_mode("auto")
    with pytest.raises(ValueError, match="unknown sandbox mode"):
        sandbox.check_mode("sometimes")


def test_cli_sandbox_flag_is_checked():
    out = subprocess.run([sys.executable, "-m", "gauntlet", "eval", "gemm", "torch_matmul", "--sandbox", "maybe",
                          "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 2 and json.loads(out.stdout)["verdict"] == "usage_error"


def test_the_seccomp_program_assembles_for_both_architectures():
    for machine in seccomp.ARCHES:
        code = seccomp.program(machine)
        assert len(code) % 8 == 0 and 30 < len(code) // 8 < 256


def test_the_interpreter_is_verified_and_its_pth_files_fingerprinted():
    env = environment.verify()
    assert env["verified"] and env["files_checked"] > 1000, env["modified"]
    one = fingerprint.interpreter_digest(env)
    planted = dict(env, pth=dict(env["pth"], **{"/x/site-packages/evil.pth": "0123"}))
    assert fingerprint.interpreter_digest(planted) != one
    edited = dict(env, modified=["torch: torch/__init__.py"])
    assert fingerprint.interpreter_digest(edited) != one


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_killing_the_baseline_worker_leaves_no_record_without_a_ratio(mode):
    """Confined, the kill is refused and the candidate's own (poor) ratio stands; unconfined, the baseline dies and
    the record is rejected (`tampering`), never a pass without a figure."""
    if not _cuda():
        pytest.skip("needs a CUDA device")
    from gauntlet.judge.timing.peaks import measure_peaks
    problem = discover.get_problem("gemm")
    spec = problem.dtype("bfloat16")
    bench = next(b for b in problem.benchmark if (b["M"], b["N"], b["K"]) == (4096, 4096, 4096))
    import torch
    peaks = measure_peaks(torch.device("cuda"), {"bfloat16": (spec.torch_dtype(), spec.tf32)})
    record = _judge(HERE / "bad" / "kills_the_baseline_worker.py", device="cuda", dtypes=("bfloat16",),
                    examples=2, max_edges=1, timing=True, shapes=[bench], timing_budget_s=4.0, peaks=peaks,
                    sandbox=mode)
    if mode == "auto" and CONFINED:
        assert record.verdict == "pass", record.reasons
        speedup = record.timings[0]["baselines"]["cublas"]["speedup"]
        assert speedup < 0.75, speedup
    else:
        assert "tampering" in [r["code"] for r in record.reasons], record.reasons


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_killed_baseline_worker_is_seen_killed(mode):
    """The CPU half of the test above (no timing on the CPU, but the same two workers of one judge): unconfined, the
    candidate's SIGKILL reaches the baseline worker, and its death reads `killed by SIGKILL` (what
    gauntlet.judge.timing.timed turns into `tampering`), not "exited with status 0": the candidate's worker's escape
    scan must not reap a sibling worker's zombie. Confined, the signal is refused and the baseline worker lives."""
    if mode == "auto" and not CONFINED:
        pytest.skip(f"this kernel cannot confine: {sandbox.missing()}")
    from gauntlet.judge.timing import timed
    from gauntlet.judge.process.isolate import Child, ChildFailed
    problem = discover.get_problem("gemm")
    base = timed.start_baseline_worker(problem, "cpu", mode)
    solution = discover.get_solution("gemm", str(HERE / "bad" / "kills_the_baseline_worker.py"))
    cand = Child(problem, solution.path, solution.backend, "cpu", sandbox=mode)
    try:
        for seed in (1, 2):       # the second request runs the escape scan after the kill
            cand.request({"op": "case", "shape": {"M": 8, "N": 8, "K": 8}, "dtype": "float32", "seed": seed}, 60,
                         "a case", max_blob=1 << 20)
        cand.close()              # its last escape scan
        if mode == "off":
            with pytest.raises(ChildFailed) as info:
                base.request({"op": "bench_end"}, 30, "a probe")
            assert "killed by SIGKILL" in info.value.reason.detail, info.value.reason.detail
        else:
            assert base.proc.poll() is None, base.proc.returncode
            base.request({"op": "bench_end"}, 30, "a probe")
    finally:
        cand.close()
        base.close()


def test_a_gated_candidate_worker_runs_no_candidate_code_before_its_go(tmp_path):
    """A deferred start (gauntlet.judge.process.isolate: the candidate's worker spawned beside the baseline worker) does
    the harness's start-up and then waits: the candidate's module is imported only after finish_start(), so no line of
    it runs before the baseline worker has measured the quiet GPU."""
    import time

    from gauntlet.judge.process.isolate import Child
    candidate = tmp_path / "marks_its_import.py"
    candidate.write_text("import os\nimport torch\nBACKEND = 'torch'\nopen('imported', 'w').write('yes')\n"
                         "def solve(a, b):\n    return torch.matmul(a, b)\n")
    child = Child(discover.get_problem("gemm"), candidate, "torch", "cpu", deferred=True)
    try:
        marker = Path(child.tmp.name) / "imported"
        time.sleep(6)                    # ample for the worker's own start-up (torch's import) on this machine
        assert child.proc.poll() is None and child.hello is None
        assert not marker.exists(), "the candidate was imported before the judge said go"
        child.finish_start()
        assert child.hello["ok"] and marker.read_text() == "yes"
        header, _ = child.request({"op": "case", "shape": {"M": 4, "N": 4, "K": 4}, "dtype": "float32", "seed": 1},
                                  60, "a case", max_blob=1 << 20)
        assert header.get("ok"), header
    finally:
        child.close()


def test_a_failed_start_fails_the_same_way_on_every_later_call(tmp_path):
    """A worker let go beside another (gauntlet.judge.evaluate._start_judge) may be waited for twice: its failure is
    remembered and said again, not turned into a read on a closed channel."""
    from gauntlet.judge.process.isolate import Child, ChildFailed
    candidate = tmp_path / "breaks_on_import.py"
    candidate.write_text("BACKEND = 'torch'\nraise ImportError('no such kernel library')\n")
    child = Child(discover.get_problem("gemm"), candidate, "torch", "cpu", deferred=True)
    try:
        reasons = []
        for _ in range(2):
            with pytest.raises(ChildFailed) as info:
                child.finish_start()
            reasons.append(info.value.reason)
        assert reasons[0] == reasons[1] and "no such kernel library" in reasons[0].detail
    finally:
        child.close()


class _FakeCard:
    """What NVML would say: {pid: bytes} on the card, and its total memory."""

    def __init__(self, used: dict, total: int = 80 << 30):
        self.used, self._total = used, total

    def used_by(self):
        return dict(self.used)

    def total(self):
        return self._total

    def share_bytes(self, judges):
        from gauntlet.gpu import CardMemory
        return CardMemory.share_bytes(self, judges)


def test_a_worker_past_its_share_of_the_card_is_stopped_and_only_its_own_processes_count(tmp_path):
    """Judges sharing a card (an H100 runner, pytest -n 14): a process holding 64.8 GiB (most likely a hoarding
    fixture's worker) left two other tests' honest candidates without memory. The watch sums the driver's
    per-process figures over the worker's tree only."""
    from gauntlet.judge.process import watchdog
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        card = _FakeCard({sleeper.pid: 3 << 30, os.getpid(): 70 << 30})      # the judge's own use is not the worker's
        bounds = watchdog.Bounds(gpu_bytes=8 << 30)
        dog = watchdog.Watchdog(sleeper.pid, str(tmp_path), bounds, lambda: [], gpu=card)
        dog.stop()                              # looked at by hand below, not by its thread
        assert dog.look(disk=False) is None and dog.peak["gpu_gib"] == 3.0
        card.used[sleeper.pid] = 9 << 30
        why = dog.look(disk=False)
        assert why.startswith("GPU memory limit: the worker's processes held 9.0 GiB") and "limit 8.0 GiB" in why
        assert bounds.as_record()["gpu_gib"] == 8.0 and watchdog.Bounds().as_record()["gpu_gib"] is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_shared_blob_area_s_pages_count_as_the_worker_s_memory_mapped_or_not(tmp_path):
    """gauntlet.protocol.Area: pages the worker writes there stay in memory after it unmaps them (the judge holds
    the file), where no resident set shows them; the watchdog counts them whole."""
    from gauntlet import protocol
    from gauntlet.judge.process import watchdog
    area = protocol.Area.create(64 << 20)
    if area is None:
        pytest.skip("no sealable memfd here")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        bounds = watchdog.Bounds(ram_bytes=256 << 20)
        dog = watchdog.Watchdog(sleeper.pid, str(tmp_path), bounds, lambda: [], area_fd=area.fd)
        dog.stop()
        assert dog.area_bytes() == 0 and dog.look(disk=False) is None
        worker = protocol.Area.attach(os.dup(area.fd))
        worker.put(0, b"\1" * (48 << 20))
        worker.close()                          # written, then unmapped and closed: only the judge's file holds it
        assert dog.area_bytes() >= 48 << 20
        bounds.ram_bytes = 32 << 20             # the sleeper alone is far under 32 MiB; with the area it is over
        assert "host memory limit" in (dog.look(disk=False) or "")
    finally:
        sleeper.kill()
        sleeper.wait()
        area.close()


HOLDER = """
import os, sys, time
fd = os.memfd_create("hoard")
os.write(fd, b"\\1" * (48 << 20))                  # written through the descriptor: in no mapping, no resident set
path = os.path.join(sys.argv[1], "gone")
disk = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
os.write(disk, b"\\1" * (40 << 20))
os.fsync(disk)
os.unlink(path)                                    # in no walk of the scratch dir
print("ready", flush=True)
time.sleep(60)
"""


def test_memfds_and_unlinked_files_held_open_count_and_the_area_only_once(tmp_path):
    """A memfd written and never mapped holds shared memory no resident set shows, and an unlinked scratch file
    holds disk no walk of the scratch dir finds: the watchdog reads both from the worker's fd folder
    (gauntlet.judge.sandbox.usage). The judge's area, which the worker also holds, is counted once."""
    from gauntlet import protocol
    from gauntlet.judge.process import watchdog
    area = protocol.Area.create(64 << 20)
    if area is None:
        pytest.skip("no sealable memfd here")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE,
                              pass_fds=(area.fd,))
    try:
        assert holder.stdout.readline().strip() == b"ready"
        writer = protocol.Area.attach(os.dup(area.fd))
        writer.put(0, b"\1" * (24 << 20))
        writer.close()
        bounds = watchdog.Bounds(ram_bytes=160 << 20, disk_bytes=64 << 20)
        dog = watchdog.Watchdog(holder.pid, str(tmp_path), bounds, lambda: [], area_fd=area.fd)
        dog.stop()
        assert dog.look(disk=True) is None, dog.held     # 24 MiB of area + 48 of memfd + the interpreter: under
        assert dog.held[0] >= 48 << 20 and dog.held[0] < 72 << 20 and dog.held[1] >= 40 << 20
        bounds.ram_bytes = 64 << 20
        assert "host memory limit" in (dog.look(disk=True) or "")
        bounds.ram_bytes, bounds.disk_bytes = 1 << 40, 32 << 20
        why = dog.look(disk=True) or ""
        assert why.startswith("disk limit") and "unlinked files it holds open" in why
    finally:
        holder.kill()
        holder.wait()
        area.close()


def test_a_watch_that_keeps_failing_stops_the_worker_instead_of_leaving_it_unbounded(tmp_path, monkeypatch):
    """The watch must not take the judge down, nor fail open: an exception in every look (as a shadowed name once
    raised, silently, in each one) stops the worker within about a second, naming the harness."""
    from gauntlet.judge.process import watchdog

    def broken(self, disk=True):
        raise RuntimeError("a bug in the watch")
    monkeypatch.setattr(watchdog.Watchdog, "look", broken)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dog = watchdog.Watchdog(sleeper.pid, str(tmp_path), watchdog.Bounds(), lambda: [])
        assert sleeper.wait(timeout=10) == -9
        assert "a harness error, not the candidate's" in dog.tripped and "a bug in the watch" in dog.tripped
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_gpu_bound_is_the_share_or_what_timing_needs_plus_a_context(monkeypatch):
    from gauntlet.judge.process import watchdog
    monkeypatch.delenv("GAUNTLET_WORKER_GPU_GIB", raising=False)
    card, gib = _FakeCard({}, total=80 << 30), 1 << 30
    gemm, attn = discover.get_problem("gemm"), discover.get_problem("attn_scores")
    assert watchdog.timing_need(gemm) < 10 * gib < watchdog.timing_need(attn)
    assert watchdog.gpu_bound(card, gemm, 8) == 10 * gib + watchdog.CONTEXT_SLACK         # 80 GiB over 8 judges
    assert watchdog.gpu_bound(card, attn, 8) == watchdog.timing_need(attn) + watchdog.CONTEXT_SLACK
    assert watchdog.gpu_bound(card, gemm, 1) == 80 * gib + watchdog.CONTEXT_SLACK         # alone: the card
    monkeypatch.setenv("GAUNTLET_WORKER_GPU_GIB", "3")
    assert watchdog.gpu_bound(card, attn, 8) == 3 * gib                                    # the user's, as it is
    bounds, card = watchdog.worker_bounds(None, gemm, "cpu")
    assert card is None and bounds.gpu_bytes == 0                                          # no card, no GPU bound



def test_the_gpu_bound_holds_what_honest_workers_held_timing_on_an_h100(monkeypatch):
    """Measured on an H100 with each judge told it had a sixth of the card (--overlap 6, or pytest -n 6 on one GPU):
    torch_matmul's workers timing the fp32 headline shapes held 17.8 GiB (attn_output) and 21.5 GiB (attn_scores),
    and were stopped as hogs at 15.3 and 16.3 GiB. The bound must hold them, at any share."""
    from gauntlet.judge.process import watchdog
    monkeypatch.delenv("GAUNTLET_WORKER_GPU_GIB", raising=False)
    gib = 1 << 30
    h100 = _FakeCard({}, total=int(79.18 * gib))
    for problem, held in (("attn_output", 17.8), ("attn_scores", 21.5)):
        for judges in (4, 6, 8):
            assert watchdog.gpu_bound(h100, discover.get_problem(problem), judges) > held * gib, (problem, judges)

@pytest.mark.gpu
@pytest.mark.serial
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_a_hoarding_candidate_leaves_the_judge_beside_it_on_the_card_alone(tmp_path):
    """Two judges on one card, as pytest -n puts them: tests/bad/hoards_gpu_memory.py takes all the memory it can,
    while an honest candidate is judged beside it. The hoarder is stopped at its share (a verdict naming the
    bound) and the honest one passes. Serial: between two of the watchdog's polls the hoarder holds most of the card
    (68.9 GiB of an H100, seen under `pytest -n 8 -m gpu`), and a test beside it that allocates in its own process
    (a ceiling measured by the test itself, no judge's retry around it) failed for lack of memory."""
    from gauntlet.gpu import CardMemory
    if CardMemory.current() is None:
        pytest.skip("NVML cannot give this card's per-process memory: no GPU bound here")
    judges = max(2, int(os.environ.get("GAUNTLET_JUDGES_PER_GPU", "1")))    # under pytest -n: the workers' count
    env = dict(os.environ, GAUNTLET_JUDGES_PER_GPU=str(judges))
    cmd = [sys.executable, "-m", "gauntlet", "eval", "gemm", "--device", "cuda", "--dtype", "bfloat16",
           "--examples", "6", "--no-timing", "--json"]
    hoard = subprocess.Popen([*cmd[:5], str(HERE / "bad" / "hoards_gpu_memory.py"), *cmd[5:]], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    honest = subprocess.run([*cmd[:5], "torch_matmul", *cmd[5:]], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    out, err = hoard.communicate(timeout=600)
    hoarder, fair = json.loads(out), json.loads(honest.stdout)          # eval --json: one record each
    # The whole document and the judge's last words on failure: on the H100 both sides once printed a usage error
    # (the file named before the problem), and nothing said so.
    assert fair.get("verdict") == "pass", (fair, honest.stderr[-3000:])
    assert hoarder.get("verdict") == "error", (hoarder, err[-3000:])
    assert any("GPU memory limit" in r["detail"] for r in hoarder["reasons"]), hoarder["reasons"]
