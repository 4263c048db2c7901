"""A bytecode cache of the judge's own: compiled modules (torch, Triton, the harness) kept in a folder the judge owns,
so that no process of a judgement compiles Python source it has compiled before.

Why: every judgement starts fresh processes (the baseline worker, the candidate's worker) that import torch, its
profiler (which imports torch._dynamo) and the harness. Where the installed packages have no `__pycache__` and none
can be written (a read-only image, a container built with PYTHONDONTWRITEBYTECODE=1), each of those processes
compiles some thousands of modules from source: most of a worker's start-up, and seconds of the judge's own
(docs/benchmarks.md, "Inside a judgement").

Trust: the folder lives under the judge's cache folder (gauntlet.judge.process.cache), outside every worker's scratch
folder. A confined worker (Landlock: writes only beneath its scratch) can read it and never write it, so a candidate
cannot plant bytecode that a later process would run. The cache is filled only by processes that run no candidate
code: the CLI's own process, and `warm()`'s, which imports what a worker imports before it sees a candidate
(`gauntlet.child.warm`, started by module name like every worker). With `--sandbox off` a worker runs unconfined and
could write anywhere its user can, this folder as much as site-packages: that mode proves nothing
(docs/threat-model.md).
Python checks each cached file against its source's size and mtime, as it does in `__pycache__`: a changed source
is compiled again, never run stale.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from ... import discover
from ...backends import triton_key
from .cache import COMPILER_DIRS, cache_root, flock_within


def prefix() -> Path | None:
    """The folder for this interpreter's bytecode (made, private to the user), or None where it is not needed (the
    installed packages have their `__pycache__`: Python reads only the prefix once one is set, so using it there
    would only compile everything a second time) or cannot be made (the judgement then runs without it)."""
    if not _needed():
        return None
    folder = cache_root() / "pycache" / f"{sys.implementation.cache_tag}"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.access(folder, os.W_OK | os.X_OK):
            return None
    except OSError:
        return None
    return folder


@functools.lru_cache(maxsize=1)
def _needed() -> bool:
    """Whether torch, the heaviest import of every worker, lacks bytecode beside its sources (`GAUNTLET_PYCACHE`:
    `always` or `never` decides instead, for tests and for images whose bytecode is known to be stale)."""
    forced = os.environ.get("GAUNTLET_PYCACHE", "").lower()
    if forced in ("always", "never"):
        return forced == "always"
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return False
    root = Path(spec.origin).parent
    for source in (root / "__init__.py", root / "_dynamo" / "__init__.py", root / "_tensor.py"):
        if source.exists() and not Path(importlib.util.cache_from_source(str(source))).exists():
            return True
    return False


def use_in_this_process() -> None:
    """The CLI's own process (a judge, running no candidate code) reads and fills the cache. Not done in a pytest
    process, which is the user's: there the workers use it, and pytest's own bytecode stays where pytest puts it."""
    folder = prefix()
    if folder is not None and sys.pycache_prefix is None:
        sys.pycache_prefix = str(folder)
        sys.dont_write_bytecode = False      # only into our own folder: nothing is written beside the sources


def worker_start_env(home: str) -> dict:
    """The child's environment: its scratch dir as HOME, TMPDIR and the compilers' caches (Triton's, CuPy's, and
    torch inductor's, whose first import sets its variable: set here, a candidate importing it changes nothing the
    worker would report), no user site-packages, none of the interpreter's PYTHON* switches but the path (PYTHONSTARTUP,
    PYTHONINSPECT, PYTHONHOME would run or find other code). The `gauntlet` package is found where the
    interpreter finds it (site-packages, or an editable install's finder there): the worker runs what the judge runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") or k == "PYTHONPATH"}
    env.update(HOME=home, TMPDIR=home, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(home, ".inductor"),
               **{var: os.path.join(home, sub) for var, sub in COMPILER_DIRS.items()})
    env.pop("TRITON_INTERPRET", None)         # the worker decides, per backend and device
    return worker_env(env)


def worker_env(env: dict) -> dict:
    """A worker reads the cache (and, confined, cannot write it; PYTHONDONTWRITEBYTECODE stays set)."""
    folder = prefix()
    if folder is not None:
        env["PYTHONPYCACHEPREFIX"] = str(folder)
        env[triton_key.ENV] = str(_triton_key_file(folder))
    return env


def _triton_key_file(folder: Path) -> Path:
    """Where warm() keeps Triton's digest of itself (gauntlet.backends.triton_key): beside the bytecode it was
    warmed with, under the judge's cache folder."""
    return folder / "triton-key.json"


def harness_files() -> list[tuple[Path, str]]:
    """Every .py file of the harness package, with its name inside it: what the stamp covers. The package is asked
    where it is, not counted up from this file: such a count goes wrong silently when this file moves, and a stamp
    that missed harness/child (what the worker runs) would keep its stale bytecode."""
    from ... import __file__ as package_file
    root = Path(package_file).resolve().parent
    return [(path, str(path.relative_to(root))) for path in sorted(root.rglob("*.py"))]


def _stamp() -> str:
    """What the cache was warmed for: the interpreter, the packages' versions and the harness's own files."""
    parts = [sys.version, sys.executable]
    for name in ("torch", "triton", "numpy", "cupy-cuda13x", "cupy-cuda12x", "nvidia-cutlass-dsl", "hypothesis",
                 "PyYAML"):
        try:
            parts.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name}=-")
    for path, name in harness_files():
        st = path.stat()
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


_WARM: dict = {}


def warm_soon() -> None:
    """Start `warm()` in a thread of this process and return at once: a driver about to start judges (`run`,
    `eval-many`, `eval`) has the workers' bytecode compiled while the judges start. Without it, on a cold cache
    the first judgement of every judge would wait for the warming after its own start-up and the ceilings, every
    judge idle (docs/benchmarks.md, "Figures moved from docstrings"). The judges'
    own `warm()` then waits on the lock and finds the stamp; where the stamp is there already this costs a stat.
    Once per process: a second call does nothing."""
    import threading
    if "done" in _WARM or "soon" in _WARM or prefix() is None:
        return
    _WARM["soon"] = True
    threading.Thread(target=warm, name="gauntlet-bytecode-warm", daemon=True).start()


def warm(timeout: float = 300.0) -> bool:
    """Fill the cache once per interpreter, package versions and harness files: a process that runs no candidate
    code imports what a worker imports (torch, the profiler's lazy imports, Triton, the harness...). Later runs find
    the stamp and pay one stat. Returns whether the cache is warm."""
    if "done" in _WARM:
        return _WARM["done"]
    _WARM["done"] = ok = _warm(timeout)
    return ok


def _warm(timeout: float) -> bool:
    """One warming per cache folder, however many judges start at once: `run` on cuda starts 4 judges per GPU, and
    without the lock each would run its own warming process on a cold cache, all compiling the same modules side by
    side. The others wait on a lock and find the stamp; one whose wait outlasts `timeout` goes on without the cache,
    as where none can be made."""
    folder = prefix()
    if folder is None:
        return False
    stamp = folder / f"warm-{_stamp()}"
    if stamp.exists():
        return True
    deadline = time.monotonic() + timeout
    try:
        lock = os.open(folder / "warm.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        if not flock_within(lock, fcntl.LOCK_EX, timeout):
            return False
        if stamp.exists():                  # warmed by the judge that held the lock
            return True
        return _fill(folder, stamp, max(1.0, deadline - time.monotonic()))
    finally:
        os.close(lock)                      # drops the lock (the kernel drops it too if this process dies)


def _fill(folder: Path, stamp: Path, timeout: float) -> bool:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") or k == "PYTHONPATH"}
    env.update(PYTHONPYCACHEPREFIX=str(folder), PYTHONNOUSERSITE="1", CUDA_VISIBLE_DEVICES="",
               GAUNTLET_WARM_WORKERS=str(warm_workers()), **{triton_key.ENV: str(_triton_key_file(folder))})
    try:
        done = subprocess.run([sys.executable, "-P", "-m", "gauntlet.child.warm"], env=env, timeout=timeout,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              cwd=str(folder))
    except (OSError, subprocess.SubprocessError):
        return False
    if done.returncode != 0:
        return False
    try:
        for old in folder.glob("warm-*"):
            old.unlink()
        stamp.touch()
    except OSError:
        return False
    return True


def warm_workers() -> int:
    """Processes the warming compiles with before its imports (gauntlet.child.warm.precompile): half the cores this
    process may use, at most 8, since the judges start beside it; 1 (no parallel pass) below 4 cores, where
    compiling whole folders costs more than the imports' own compiling (docs/benchmarks.md, "Inside a judgement")."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(8, cores // 2) if cores >= 4 else 1
