"""Which backends this machine can run, and how to prepare a process for one.

torch runs everywhere; Triton runs on the GPU, or on the CPU under its interpreter (TRITON_INTERPRET=1, which must
be set before triton is first imported: the spawned child process makes that natural); CuPy and CuTe DSL need a
GPU and report `unsupported` elsewhere (not a failure).
"""
from __future__ import annotations

import importlib.util
import os

from ..discover import BACKENDS

_MODULES = {"torch": "torch", "triton": "triton", "cupy": "cupy", "cute": "cutlass"}


def cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


def default_device() -> str:
    return "cuda" if cuda_available() else "cpu"


def status(backend: str | None, device: str) -> tuple[bool, str]:
    """(can run, why not) for a backend on a device, without importing the backend."""
    if backend not in BACKENDS:
        return False, f"BACKEND must be one of {', '.join(BACKENDS)}, got {backend!r}"
    if device not in ("cpu", "cuda"):
        return False, f"unknown device {device!r}; known: cpu, cuda"
    if device == "cuda" and not cuda_available():
        return False, "no CUDA device on this machine"
    if device == "cpu" and backend in ("cupy", "cute"):     # first: installing the package would not help
        return False, f"{backend} kernels need a GPU; this run is on the CPU"
    if importlib.util.find_spec(_MODULES[backend]) is None:
        return False, missing(backend)
    if device == "cpu" and backend == "triton":
        broken = interpreter_broken()
        if broken:
            return False, broken
    return True, ""


def missing(backend: str) -> str:
    """Why a backend whose package is absent cannot run, with the install that fixes it: the extra of the same name
    (pyproject.toml's optional-dependencies), which also pins what the backend needs beside it (numpy < 2.4 for
    Triton's CPU interpreter)."""
    return (f"the {_MODULES[backend]!r} package is not installed: pip install 'gauntlet[{backend}]' "
            f"(in the environment `gauntlet` runs from) to judge {backend} kernels")


def interpreter_broken() -> str:
    """Why Triton's CPU interpreter cannot run kernels with the installed packages, or "". Triton <= 3.6's
    interpreter turns one-element arrays into Python scalars, which numpy 2.4 refuses ("only 0-dimensional arrays
    can be converted to Python scalars", raised inside every kernel): with that pair every CPU judgement of a Triton
    kernel would be a `crash` blamed on the candidate, so the backend is `unsupported` on the CPU instead (numpy 2.5
    included). Read from the packages' metadata: nothing is imported."""
    from importlib import metadata
    try:
        triton, numpy = metadata.version("triton"), metadata.version("numpy")
    except metadata.PackageNotFoundError:
        return ""
    if _release(triton) <= (3, 6) and _release(numpy) >= (2, 4):
        return (f"Triton {triton}'s CPU interpreter cannot run kernels with numpy {numpy} (numpy >= 2.4 refuses its "
                "array-to-scalar conversions): install numpy<2.4 to judge Triton kernels on the CPU, or judge them "
                "on a GPU")
    return ""


def _release(version: str) -> tuple:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def prepare_process(backend: str, device: str) -> None:
    """Called in the child before anything imports triton."""
    if device == "cpu" and backend == "triton":
        os.environ["TRITON_INTERPRET"] = "1"


# The library each backend's candidates import first, imported by the worker before its gate (gauntlet.child.worker,
# Session.prepare): at the gate's word the candidate's import then finds it loaded (Triton's import is a sizeable part
# of a worker's start-up: docs/benchmarks.md, *Figures moved from docstrings*). Only what is known to import without
# touching the GPU (Triton sets up its driver on first use); CuPy and the CuTe DSL are left to the candidate's own
# import.
PRELOAD = {"triton": ("triton", "triton.language")}


def preload(backend: str, device: str) -> None:
    """Import the backend's library ahead of the candidate (PRELOAD), on a GPU only (on the CPU the Triton
    interpreter's own set-up, after_import, imports it). A library that fails to import is left for the candidate's
    import to fail on and say (import_error)."""
    if device != "cuda":
        return
    for name in PRELOAD.get(backend, ()):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - said by the candidate's import, with its traceback
            return


_WARMING: list = []


def start_warming(backend: str, device: str) -> None:
    """Begin, in a thread of its own, what Triton does once per process at its first compile or cache lookup
    (`_warm_triton`), so that it is done before the worker's go and overlaps the worker's import of torch (its
    hashing and file reads let go of the GIL): it is a large part of a Triton candidate's first correctness call
    (docs/benchmarks.md), and done in line before the go it would lengthen the worker's start by as much. The thread
    imports Triton only, which imports no torch, so it never waits for a module the worker's main thread is
    importing; `finish_warming` waits for it before the main thread imports anything that imports Triton, and it is
    gone before the worker's snapshot of its threads is taken."""
    if device == "cuda" and backend == "triton":
        import threading
        thread = threading.Thread(target=_warm_triton, name="gauntlet-triton-warm", daemon=True)
        thread.start()
        _WARMING.append(thread)


def finish_warming() -> None:
    """Wait for `start_warming`'s thread, if any."""
    for thread in _WARMING:
        thread.join()
    _WARMING.clear()


def _warm_triton() -> None:
    """The digest of Triton's own installed files (triton.runtime.cache.triton_key, part of every kernel's cache
    key: it reads and hashes libtriton, hundreds of MB), taken from the judge's cache where it is there and current
    (gauntlet.backends.triton_key), and the import of Triton's Gluon front end, which the first specialization of an
    argument list pulls in. Reads files and imports modules only: no GPU."""
    try:
        from . import triton_key as stored
        if not stored.load(os.environ.get(stored.ENV)):
            from triton.runtime.cache import triton_key
            triton_key()
        importlib.import_module("triton.experimental.gluon")
    except Exception:  # noqa: BLE001 - an older or newer Triton without these: its first compile does what it does
        pass


def after_import(backend: str, device: str, launch_name=None) -> None:
    """Fix-ups that depend on the backend's package being imported (the interpreter's bf16 dot). `launch_name` names
    the profiler range of each interpreted launch (the worker's ledger, gauntlet.child.launches)."""
    if device == "cpu" and backend == "triton":
        from .triton_interpreter import mark_launches, patch_interpreter
        patch_interpreter()
        mark_launches(launch_name)
