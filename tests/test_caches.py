"""The judge's caches (gauntlet.judge.process.bytecode, .peaks, .environment) and the cheap escape scan
(gauntlet.judge.process.isolate): each saves seconds per judgement, and none may let a stale or planted file count."""
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from gauntlet.judge.process import bytecode, environment, isolate, pids
from gauntlet.judge.timing import peaks


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GAUNTLET_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GAUNTLET_PYCACHE", "always")      # this machine's packages have their bytecode: force it
    bytecode._WARM.clear()
    bytecode._needed.cache_clear()
    yield tmp_path / "cache"
    bytecode._WARM.clear()
    bytecode._needed.cache_clear()


@pytest.fixture
def slow_fill(monkeypatch):
    """bytecode._fill replaced by a half-second stand-in that writes the stamp; the list of its calls' timeouts."""
    fills = []

    def fill(folder, stamp, timeout):
        fills.append(timeout)
        time.sleep(0.5)
        stamp.touch()
        return True

    monkeypatch.setattr(bytecode, "_fill", fill)
    return fills


def test_the_cache_stamp_covers_the_whole_harness_package():
    """What the worker runs (harness/child) and what the judge runs alike: a change to either refreshes the cache.
    After issue 21's move the stamp covered harness/judge only."""
    names = {name for _, name in bytecode.harness_files()}
    assert {"child/worker.py", "judge/evaluate.py", "gpu.py", "__init__.py"} <= names


def test_warm_fills_the_bytecode_cache_once_and_workers_are_pointed_at_it(cache):
    assert bytecode.warm()
    folder = bytecode.prefix()
    assert folder is not None and folder.is_relative_to(cache)
    compiled = list(folder.rglob("*.pyc"))
    names = {p.name.split(".")[0] for p in compiled}
    # What a worker imports before any candidate: torch, the profiler's lazy imports (torch._dynamo) and the harness.
    assert {"worker", "timing", "guard"} <= names and any("_dynamo" in str(p) for p in compiled)
    stamp = list(folder.glob("warm-*"))
    assert len(stamp) == 1
    bytecode._WARM.clear()
    t0 = time.monotonic()
    assert bytecode.warm()                        # the stamp is found: no second warming process
    assert time.monotonic() - t0 < 2.0
    env = bytecode.worker_start_env(str(cache))
    assert env["PYTHONPYCACHEPREFIX"] == str(folder)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # a worker reads the cache; it never writes bytecode


def test_the_warming_compiles_whole_folders_in_parallel_first(tmp_path, monkeypatch):
    """gauntlet.child.warm.precompile: the standard library and the named packages (torch, the harness...), test
    folders left out, compiled into the cache folder by several processes before the import chain runs; and no
    parallel pass where the host has under 4 cores."""
    from gauntlet.child import warm
    files = warm._sources()
    names = {Path(f).as_posix() for f in files}
    assert any(n.endswith("/torch/__init__.py") for n in names)
    assert any(n.endswith("/harness/child/worker.py") for n in names)
    assert any(n.endswith("/os.py") for n in names)
    assert not any("/tests/" in n or "/test/" in n for n in names)
    picked = [f for f in files if f.endswith(("/torch/_tensor.py", "/harness/gpu.py", "/json/decoder.py"))]
    assert len(picked) == 3
    monkeypatch.setattr(warm, "_sources", lambda: picked)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path))
    import importlib.util
    assert warm.precompile(2) == 3
    for source in picked:
        cached = Path(importlib.util.cache_from_source(source))
        assert cached.is_relative_to(tmp_path) and cached.stat().st_size > 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)))
    assert bytecode.warm_workers() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert bytecode.warm_workers() == 8


def test_judges_starting_at_once_warm_the_cache_once(cache, slow_fill):
    """`run` on cuda starts 4 judges per GPU: on a cold cache each ran its own warming process (13 s each on an
    H100). Now one warms and the others wait for its stamp; a lock held past the wait goes on without the cache."""
    import fcntl
    fills = slow_fill
    got = []
    judges = [threading.Thread(target=lambda: got.append(bytecode._warm(30.0))) for _ in range(4)]
    for judge in judges:
        judge.start()
    for judge in judges:
        judge.join()
    assert got == [True] * 4 and len(fills) == 1
    for old in bytecode.prefix().glob("warm-*"):
        old.unlink()
    with open(bytecode.prefix() / "warm.lock", "rb") as held:      # read-only is enough to hold a flock
        fcntl.flock(held, fcntl.LOCK_EX)
        t0 = time.monotonic()
        assert bytecode._warm(0.3) is False and len(fills) == 1
        assert time.monotonic() - t0 < 2.0


def test_warm_soon_warms_in_the_background_and_the_judges_find_its_stamp(cache, slow_fill):
    """A driver starts the warming before its judges (bytecode.warm_soon): it returns at once, and a judge's own
    warm() waits for that one warming instead of starting a second (on an H100's cold cache every judge sat idle
    15 s for it after its own start-up)."""
    fills = slow_fill
    t0 = time.monotonic()
    bytecode.warm_soon()
    assert time.monotonic() - t0 < 0.3
    deadline = time.monotonic() + 5
    while not fills and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fills, "warm_soon started no warming"
    got = []
    judge = threading.Thread(target=lambda: got.append(bytecode._warm(30.0)))   # another judge, same cache
    judge.start()
    judge.join()
    assert got == [True] and len(fills) == 1
    bytecode.warm_soon()                          # warmed: nothing more is started
    time.sleep(0.1)
    assert len(fills) == 1


def test_the_commands_that_start_workers_warm_soon_and_the_others_do_not(cache, monkeypatch, tmp_path):
    from gauntlet.cli.main import main
    asked = []
    monkeypatch.setattr(bytecode, "warm_soon", lambda: asked.append(1))
    out = str(tmp_path / "r.json")
    assert main(["run", "--problem", "no_such_problem", "--device", "cpu", "--out", out]) == 2   # a usage error
    assert asked == [1]
    assert main(["list"]) == 0
    assert asked == [1]


def test_warm_soon_does_nothing_where_no_cache_is_needed(cache, monkeypatch):
    monkeypatch.setenv("GAUNTLET_PYCACHE", "never")
    bytecode._needed.cache_clear()
    monkeypatch.setattr(bytecode, "_fill", lambda *a: pytest.fail("warmed a cache that is not needed"))
    bytecode.warm_soon()
    time.sleep(0.1)
    assert [t for t in threading.enumerate() if t.name == "gauntlet-bytecode-warm"] == []


def test_a_judge_slot_imports_through_the_bytecode_cache(cache):
    """A slot (gauntlet.executors.slot, `run`'s judges) reads and fills the judge's bytecode cache as the `gauntlet`
    process does: before, it compiled torch from source at every start where site-packages has no __pycache__."""
    env = dict(os.environ, GAUNTLET_CACHE=str(cache), GAUNTLET_PYCACHE="always")
    done = subprocess.run([sys.executable, "-P", "-m", "gauntlet.executors.slot"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = bytecode.prefix()
    names = {str(p.relative_to(folder)) for p in folder.rglob("*.pyc")}
    assert any(n.endswith("harness/executors/task.cpython-%d%d.pyc" % sys.version_info[:2]) for n in names)
    assert any("torch/__init__." in n for n in names)


def test_the_cache_is_left_alone_where_the_packages_have_their_bytecode(cache, monkeypatch):
    monkeypatch.setenv("GAUNTLET_PYCACHE", "")
    bytecode._needed.cache_clear()
    import importlib.util

    import torch
    # The same three modules bytecode._needed reads: in a fresh venv torch/__init__ may have its bytecode while
    # torch/_dynamo's is not written yet (this test read only the first and failed in CI that way).
    root = Path(torch.__file__).parent
    has = all(os.path.exists(importlib.util.cache_from_source(str(src)))
              for src in (root / "__init__.py", root / "_dynamo" / "__init__.py", root / "_tensor.py") if src.exists())
    assert (bytecode.prefix() is None) == has
    monkeypatch.setenv("GAUNTLET_PYCACHE", "never")
    bytecode._needed.cache_clear()
    assert bytecode.prefix() is None and "PYTHONPYCACHEPREFIX" not in bytecode.worker_start_env(str(cache))


def test_a_worker_confined_by_landlock_cannot_write_the_bytecode_cache(cache):
    from gauntlet.judge.sandbox import Confinement, landlock
    from gauntlet.judge.sandbox.limits import Limits
    if landlock.abi() < 1:
        pytest.skip("no Landlock on this kernel")
    folder = bytecode.prefix()
    scratch = cache / "scratch"
    scratch.mkdir()
    conf = Confinement("require", str(scratch), Limits())
    try:
        out = subprocess.run([sys.executable, "-c", f"open({str(folder / 'planted.pyc')!r}, 'wb').write(b'x')"],
                             preexec_fn=conf.preexec, capture_output=True, text=True, timeout=60)
    finally:
        conf.close()
    assert out.returncode != 0 and "PermissionError" in out.stderr
    assert not (folder / "planted.pyc").exists()


def test_the_escape_scan_reads_our_children_and_agrees_with_a_full_scan():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        kids = pids.children_of(os.getpid())
        assert sleeper.pid in kids
        full = [int(p) for p in os.listdir("/proc") if p.isdigit() and (pids.stat(int(p)) or [0, 0])[1] == os.getpid()]
        assert set(full) <= set(kids) | {p for p in full if not os.path.exists(f"/proc/{p}")}
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_double_forked_process_is_found_as_escaped():
    pids.become_subreaper()
    since = pids.stat(os.getpid())[4]
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(30)\n"
            "    os._exit(0)\n"
            "os.wait()\n")
    subprocess.run([sys.executable, "-c", code], timeout=30, start_new_session=True)
    escaped = []
    for _ in range(100):
        escaped = pids.adopted_orphans(set(), since)
        if escaped:
            break
        time.sleep(0.02)
    try:
        assert len(escaped) == 1
    finally:
        for pid in escaped:
            os.kill(pid, 9)
            os.waitpid(pid, 0)


def test_the_peaks_cache_keeps_the_best_figure_per_card(cache, monkeypatch):
    monkeypatch.setattr(peaks, "_card_key", lambda device: "H100|GPU-1|driver 13000|torch x|cuda 13.0")
    measured = []

    def fake_measure(device, dtypes):
        measured.append(sorted(dtypes))
        return {**{name: {"tflops": 700.0} for name in dtypes}, "copy_gbps": 2900.0}
    monkeypatch.setattr(peaks, "measure_peaks", fake_measure)
    spec = {"bfloat16": ("bf16", False)}
    assert peaks.cached_peaks("cuda", spec) == {"bfloat16": {"tflops": 700.0}, "copy_gbps": 2900.0}
    assert peaks.cached_peaks("cuda", spec)["bfloat16"]["tflops"] == 700.0
    assert measured == [["bfloat16"]]                       # measured once, then read
    peaks.cached_peaks("cuda", {**spec, "float16": ("fp16", False)})
    assert measured == [["bfloat16"], ["float16"]]          # only the dtype it lacked
    peaks.remember("cuda", {"bfloat16": {"tflops": 790.0}, "copy_gbps": 2000.0})   # a re-measure, better and worse
    got = peaks.cached_peaks("cuda", spec)
    assert got["bfloat16"]["tflops"] == 790.0 and got["copy_gbps"] == 2900.0
    monkeypatch.setattr(peaks, "_card_key", lambda device: "H200|GPU-2|driver 13000|torch x|cuda 13.0")
    peaks.cached_peaks("cuda", spec)                        # another card: its own figures
    assert measured[-1] == ["bfloat16"]


def test_the_int8_ceiling_is_the_tensor_cores_rate_not_cublaslt_alone(monkeypatch):
    # cuBLASLt's int8 reads about half the tensor cores' rate on an H100 (~950 of ~1979 TOPS): an exact kernel at
    # 1584 TOPS was refused against it. Twice the measured bf16 rate stands for the tensor cores' int8 rate.
    n = 64
    monkeypatch.setattr(torch, "_int_mm", lambda a, b: None)
    monkeypatch.setattr(peaks, "held_ms", lambda fn, flush, n=7, stat=min: 2 * 64**3 / 950.0 / 1e9)
    monkeypatch.setattr(peaks, "_matmul_tflops", lambda device, dtype, tf32, n, flush: 790.0)
    got = peaks._int8_peak("cpu", n, None)
    assert got["tflops"] == 1580.0 and "bf16" in got["note"] and "950" in got["note"]
    assert not peaks.over_ceilings({"dtype": "int8", "tflops": 1584.0, "gbps": 0.0, "shape": {}}, {"int8": got})
    assert peaks.over_ceilings({"dtype": "int8", "tflops": 2400.0, "gbps": 0.0, "shape": {}}, {"int8": got})

    def no_bf16(*args):
        raise RuntimeError("no bf16 GEMM on this card")
    monkeypatch.setattr(peaks, "_matmul_tflops", no_bf16)    # then cuBLASLt's int8 rate is the ceiling, as before
    got = peaks._int8_peak("cpu", n, None)
    assert abs(got["tflops"] - 950.0) < 1e-6 and "_int_mm" in got["note"]


def test_a_rewritten_file_is_hashed_again_even_with_its_mtime_put_back(tmp_path):
    f = tmp_path / "mod.py"
    f.write_text("x = 1\n")
    stamp = environment._stamp(f, "digest")
    st = f.stat()
    time.sleep(0.01)
    f.write_text("x = 2\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))         # what a planter would do: the old mtime back
    assert f.stat().st_mtime_ns == st.st_mtime_ns
    assert environment._stamp(f, "digest") != stamp          # ctime moved: the cache does not vouch for it


def test_verify_uses_its_cache_and_still_verifies(cache, monkeypatch):
    environment.verify.cache_clear()
    first = environment.verify()
    hashed = []
    real = environment._hash
    monkeypatch.setattr(environment, "_hash", lambda path, mode: hashed.append(path) or real(path, mode))
    environment.verify.cache_clear()
    second = environment.verify()
    environment.verify.cache_clear()
    assert second["verified"] == first["verified"] and second["files_checked"] == first["files_checked"]
    assert len(hashed) < first["files_checked"] // 10


def test_a_package_file_that_no_longer_matches_its_record_is_named(tmp_path, monkeypatch):
    """environment._record reads RECORD with csv (hashed .py and .pth entries only, quoted paths too), and
    _check_dist names a file whose bytes changed since its wheel was installed."""
    import base64
    import hashlib
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "a.py").write_text("x = 1\n")
    (site / "pkg" / "b,c.py").write_text("y = 2\n")
    good = base64.urlsafe_b64encode(hashlib.sha256(b"x = 1\n").digest()).rstrip(b"=").decode()
    record = (f"pkg/a.py,sha256={good},6\n\"pkg/b,c.py\",sha256={good},6\npkg/lib.so,sha256=abc,9\n"
              "pkg-1.0.dist-info/RECORD,,\n")

    class Dist:
        def read_text(self, name):
            return record if name == "RECORD" else None

        def locate_file(self, path):
            return site / path
    assert environment._record(Dist()) == [("pkg/a.py", "sha256", good), ("pkg/b,c.py", "sha256", good)]
    monkeypatch.setattr(environment.md, "distribution", lambda name: Dist())
    checked, modified = environment._check_dist("pkg", {})
    assert checked == 2 and modified == ["pkg: pkg/b,c.py"]          # its bytes are not what RECORD says


def test_the_idle_flush_time_is_kept_per_card_and_stands_in_for_one_measured_beside_a_candidate(cache, monkeypatch):
    from gauntlet.judge.timing import timed
    monkeypatch.setattr(peaks, "_card_key", lambda device: "H100|GPU-1|driver 13000|torch x|cuda 13.0")
    assert peaks.cached_quiet("cuda") is None             # first judgement on this card: the gated start
    peaks.remember_quiet("cuda", 0.040)
    peaks.remember_quiet("cuda", 0.055)                   # a busier reading does not replace the idle one
    peaks.remember_quiet("cuda", None)
    assert peaks.cached_quiet("cuda") == 0.040

    class Base:                                           # a baseline worker whose start is still under way
        hello, device = None, "cpu"

        def finish_start(self):
            self.hello = {"ok": True, "quiet_ms": 0.9}    # measured while the candidate's worker ran beside it
    base = Base()
    timed.ensure_baseline(base, None, peaks.cached_quiet("cuda"))
    assert base.hello["quiet_ms"] == 0.040
    gated = Base()
    gated.hello = {"ok": True, "quiet_ms": 0.035}
    timed.ensure_baseline(gated, None, None)              # no known value: its own (gated) measurement stands
    assert gated.hello["quiet_ms"] == 0.035


def test_a_candidate_starts_beside_a_baseline_worker_still_starting():
    """With the card's idle flush time known, the candidate's worker is not held back: both gated workers are let go
    together when the judge is made, so their GPU start-ups share one turn on the card (never beside another judge's
    timing), and the baseline's confinement is recorded with the candidate's (the first H100 run of this path
    crashed in _start_judge on a missing one)."""
    from gauntlet import discover
    from gauntlet.judge import evaluate
    from gauntlet.judge.timing import timed
    from gauntlet.judge.records.results import EvalRecord
    problem = discover.get_problem("gemm")
    solution = discover.get_solution("gemm", "torch_matmul")
    opts = evaluate.Options(device="cpu")
    record = EvalRecord(problem="gemm", solution=solution.name, path=str(solution.path), backend="torch",
                        device="cpu")
    base = timed.start_baseline_worker(problem, "cpu", opts.sandbox, deferred=True)
    judge = None
    try:
        assert base.gated and base.hello is None              # spawned, waiting for its word
        judge = evaluate._start_judge(problem, solution, opts, record, base)
        assert judge is not None and record.confinement["candidate"] is not None
        assert base.hello is not None and record.confinement["baseline"] is not None
        timed.ensure_baseline(base, problem, 0.04)
        assert base.hello["ok"] and base.hello["quiet_ms"] == 0.04
        assert base.confinement is not None
    finally:
        isolate.close_all([judge.child if judge else None, base])


# -- a candidate file's compiled kernels (cache.seed_compiled / harvest_compiled) ---------------------------------

def _compiler_output(home: Path) -> None:
    """What a worker's compilers leave: Triton's folders of files and CuPy's files, each named by a hash."""
    (home / ".triton" / "abc123").mkdir(parents=True)
    (home / ".triton" / "abc123" / "k.cubin").write_bytes(b"\x7fELF kernel")
    (home / ".triton" / "abc123" / "k.json").write_text("{}")
    (home / ".cupy").mkdir()
    (home / ".cupy" / "def456.cubin").write_bytes(b"cupy kernel")


def test_a_files_compiled_kernels_seed_its_next_worker_and_no_other_file(cache, tmp_path):
    from gauntlet.judge.process import cache as kc
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text("BACKEND = 'triton'\n")
    two.write_text("BACKEND = 'triton'\n# another file\n")
    key = kc.compiled_key(one, "native")
    assert key != kc.compiled_key(two, "native") and key != kc.compiled_key(one, "kernelbench")
    first = tmp_path / "first"
    _compiler_output(first)
    assert kc.harvest_compiled(key, str(first)) == 2
    assert kc.harvest_compiled(key, str(first)) == 0              # kept once
    again = tmp_path / "again"
    again.mkdir()
    assert kc.seed_compiled(key, str(again)) == 2
    assert (again / ".triton" / "abc123" / "k.cubin").read_bytes() == b"\x7fELF kernel"
    assert (again / ".cupy" / "def456.cubin").read_bytes() == b"cupy kernel"
    other = tmp_path / "other"
    other.mkdir()
    assert kc.seed_compiled(kc.compiled_key(two, "native"), str(other)) == 0
    assert not list(other.rglob("*"))


def test_links_special_files_deep_folders_and_oversized_entries_are_not_kept(cache, tmp_path, monkeypatch):
    """A worker writes its scratch as it likes: a link to a file of the judge's, a FIFO that would hang a reader, a
    nested folder, an entry past the size bound, a compiler folder that is a link elsewhere. None of them is copied
    into the judge's cache."""
    from gauntlet.judge.process import cache as kc
    home = tmp_path / "home"
    secret = tmp_path / "judges_file"
    secret.write_text("not the worker's")
    tri = home / ".triton"
    (tri / "linked").mkdir(parents=True)
    os.symlink(secret, tri / "linked" / "k.cubin")
    os.symlink(secret, tri / "link_entry")
    os.mkfifo(tri / "fifo_entry")
    (tri / "deep" / "inner").mkdir(parents=True)
    (tri / "deep" / "inner" / "k.cubin").write_bytes(b"x")
    (tri / "big").mkdir()
    (tri / "big" / "k.cubin").write_bytes(b"\0" * 4096)
    (tri / "fine").mkdir()
    (tri / "fine" / "k.cubin").write_bytes(b"ok")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "e1").mkdir(parents=True)
    (elsewhere / "e1" / "k.cubin").write_bytes(b"not compiled by the worker")
    os.symlink(elsewhere, home / ".cupy")          # a compiler folder that points outside the scratch
    monkeypatch.setattr(kc, "MAX_ENTRY_BYTES", 1024)
    assert kc.harvest_compiled("k" * 64, str(home)) == 1
    kept = cache / kc.COMPILED / ("k" * 64) / ".triton"
    assert sorted(p.name for p in kept.iterdir()) == ["fine"]
    assert not (cache / kc.COMPILED / ("k" * 64) / ".cupy").exists()


def test_only_the_most_recently_judged_files_kernels_are_kept(cache, tmp_path, monkeypatch):
    from gauntlet.judge.process import cache as kc
    monkeypatch.setattr(kc, "MAX_FILES_KEPT", 2)
    for i, key in enumerate(("a" * 64, "b" * 64, "c" * 64)):
        home = tmp_path / key
        _compiler_output(home)
        kc.harvest_compiled(key, str(home))
        os.utime(cache / kc.COMPILED / key, (1000 + i, 1000 + i))
    kc._forget_oldest()
    assert sorted(p.name for p in (cache / kc.COMPILED).iterdir()) == ["b" * 64, "c" * 64]


def test_a_candidate_worker_is_seeded_with_what_its_file_compiled_last_time_only_under_landlock(cache, tmp_path):
    """End to end through isolate.Child: the first worker writes an entry into its TRITON_CACHE_DIR; after it is
    closed the judge has it, and the next worker for the same file starts with it. With --sandbox off (no Landlock:
    a worker could write the judge's cache for any file) nothing is kept or seeded."""
    from gauntlet import discover
    from gauntlet.judge import sandbox
    from gauntlet.judge.process import cache as kc
    from gauntlet.judge.process.isolate import Child
    if not sandbox.offered()["landlock_abi"]:
        pytest.skip("this kernel offers no Landlock: the compiled-kernel cache is not kept without it")
    sol = tmp_path / "compiles.py"
    sol.write_text("import os, torch\nBACKEND = 'torch'\n"
                   "entry = os.path.join(os.environ['TRITON_CACHE_DIR'], 'e0')\nos.makedirs(entry, exist_ok=True)\n"
                   "open(os.path.join(entry, 'k.cubin'), 'w').write('compiled once')\n"
                   "def solve(a, b):\n    return torch.matmul(a, b)\n")
    problem = discover.get_problem("gemm")
    with Child(problem, sol, "torch", "cpu", deferred=True) as first:
        assert not (Path(first.tmp.name) / ".triton" / "e0").exists()
        first.finish_start()
        assert (Path(first.tmp.name) / ".triton" / "e0").exists()
    with Child(problem, sol, "torch", "cpu") as second:
        assert (Path(second.tmp.name) / ".triton" / "e0" / "k.cubin").read_text() == "compiled once"
    with Child(problem, None, "torch", "cpu", role="baseline") as base:
        assert not (Path(base.tmp.name) / ".triton").exists()
    sol.write_text(sol.read_text() + "# changed\n")
    for _ in range(2):
        with Child(problem, sol, "torch", "cpu", sandbox="off", deferred=True) as unconfined:
            assert not (Path(unconfined.tmp.name) / ".triton").exists()
            unconfined.finish_start()
    assert len(list((cache / kc.COMPILED).iterdir())) == 1


def test_a_seeded_triton_kernel_is_found_by_triton_itself(cache, tmp_path, monkeypatch):
    """Triton's group file names a kernel's files by absolute path, in the folder of the worker that compiled them.
    Seeded unchanged, the group pointed into a deleted folder and Triton compiled the kernel again (every
    specialization, every time a file was judged again: seen on an H100). Written and then read back by Triton's own
    cache manager, from two workers' folders."""
    triton_cache = pytest.importorskip("triton.runtime.cache")
    from gauntlet.judge.process import cache as kc
    first, again = tmp_path / "first", tmp_path / "again"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(first / ".triton"))
    writer = triton_cache.FileCacheManager("K" * 52)
    members = {name: writer.put(data, name) for name, data in
               (("k.cubin", b"\x7fELF kernel"), ("k.json", '{"name": "k"}'), ("k.ptx", ".entry k"))}
    writer.put_group("k.json", members)
    assert set(writer.get_group("k.json")) == set(members)
    assert kc.harvest_compiled("t" * 64, str(first)) == 1
    shutil.rmtree(first)                              # the worker that compiled it is gone, with its folder
    again.mkdir()
    assert kc.seed_compiled("t" * 64, str(again)) == 1
    monkeypatch.setenv("TRITON_CACHE_DIR", str(again / ".triton"))
    found = triton_cache.FileCacheManager("K" * 52).get_group("k.json")
    assert set(found) == set(members)
    assert all(Path(path).parent == again / ".triton" / ("K" * 52) for path in found.values())
    assert Path(found["k.cubin"]).read_bytes() == b"\x7fELF kernel"


def test_a_seeded_group_names_no_file_outside_its_own_entry(cache, tmp_path):
    """The group file is the worker's writing: a path it names elsewhere (the judge's files, another entry) is
    taken by its file name only, inside the entry, and a name with no such file there is dropped."""
    from gauntlet.judge.process import cache as kc
    entry = tmp_path / "first" / ".triton" / "e1"
    entry.mkdir(parents=True)
    (entry / "k.cubin").write_bytes(b"x")
    (entry / "__grp__k.json").write_text(json.dumps({"child_paths": {
        "k.cubin": "/somewhere/else/k.cubin", "secret": "/etc/passwd", "none": "/x/", "up": "../../k.cubin"}}))
    (tmp_path / "first" / ".triton" / "e2").mkdir()
    (tmp_path / "first" / ".triton" / "e2" / "__grp__bad.json").write_text("not json")
    assert kc.harvest_compiled("u" * 64, str(tmp_path / "first")) == 2
    again = tmp_path / "again"
    again.mkdir()
    assert kc.seed_compiled("u" * 64, str(again)) == 2
    group = json.loads((again / ".triton" / "e1" / "__grp__k.json").read_text())
    assert group == {"child_paths": {"k.cubin": str(again / ".triton" / "e1" / "k.cubin"),
                                     "up": str(again / ".triton" / "e1" / "k.cubin")}}
    assert not (again / ".triton" / "e2" / "__grp__bad.json").exists()


def test_tritons_once_per_process_work_runs_in_a_thread_and_is_done_before_the_worker_goes_on():
    """Triton's digest of its own files and its Gluon import (0.6 s of a Triton candidate's first correctness call on
    an H100) run in a thread beside the worker's import of torch; after finish_warming they are done and the thread
    is gone (the worker's snapshot of its threads comes later). Nothing is started for another backend or on the
    CPU, where the interpreter is set up instead."""
    pytest.importorskip("triton")
    code = ("import sys, threading\n"
            "from gauntlet import backends\n"
            "backends.start_warming('triton', 'cpu'); backends.start_warming('torch', 'cuda')\n"
            "assert threading.active_count() == 1 and 'triton' not in sys.modules\n"
            "backends.start_warming('triton', 'cuda')\n"
            "import torch\n"
            "backends.finish_warming()\n"
            "from triton.runtime.cache import triton_key\n"
            "assert triton_key.cache_info().currsize == 1, triton_key.cache_info()\n"
            "assert 'triton.experimental.gluon' in sys.modules\n"
            "assert [t.name for t in threading.enumerate()] == ['MainThread']\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_tritons_digest_of_itself_is_computed_once_and_taken_only_while_the_files_are_unchanged(tmp_path):
    """The judge's warm-up process stores triton_key() with a stamp of the files it covers; a worker takes it (and
    Triton then skips its 0.42 s of hashing) only where the stamp matches the installed files: a stored value whose
    stamp is not the installation's is refused and Triton's own function stays in place."""
    pytest.importorskip("triton")
    stored = tmp_path / "triton-key.json"
    code = ("import json, sys\n"
            "from gauntlet.backends import triton_key as tk\n"
            "import triton.runtime.cache as cache\n"
            "path = sys.argv[1]\n"
            "assert not tk.load(path) and not tk.load(None)\n"
            "assert tk.store(path)\n"
            "doc = json.load(open(path))\n"
            "real = cache.triton_key()\n"
            "assert doc['key'] == real\n"
            "own = cache.triton_key\n"
            "json.dump(dict(doc, stamp='0' * 64, key='planted'), open(path + '.stale', 'w'))\n"
            "assert not tk.load(path + '.stale') and cache.triton_key is own\n"
            "assert tk.load(path) and cache.triton_key is not own and cache.triton_key() == real\n")
    done = subprocess.run([sys.executable, "-c", code, str(stored)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
