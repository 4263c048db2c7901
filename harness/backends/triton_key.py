"""Triton's digest of its own installed files, computed once per installation instead of once per worker.

Why: every kernel's cache key starts with triton.runtime.cache.triton_key(), a sha256 over Triton's compiler, backend
and language sources and its libtriton (hundreds of MB). Triton computes it once per process, at its first compile or
cache lookup, a sizeable part of a Triton candidate's first correctness call (docs/benchmarks.md, "One eval"), in every
worker, for a value that changes only when Triton is reinstalled. The judge's warm-up process (gauntlet.child.warm: a
process that runs no candidate code, started by the judge) computes it and writes it, with a stamp of every file it
covers (path, size, modification time), into the judge's cache folder, where no confined worker can write. A worker
reads it before its candidate exists, checks the stamp against the files as they are, and hands Triton the value: a file
changed since (a reinstall, an edited source) fails the check and Triton computes the digest itself.

The value is only part of a cache key: a wrong one could at worst make the candidate's own compiled-kernel cache
(gauntlet.judge.process.cache) miss or hit stale entries of the same file, never change what is judged or timed.
"""
from __future__ import annotations

import hashlib
import json
import os

ENV = "GAUNTLET_TRITON_KEY"          # the file's path, set by the judge for its warm-up process and every worker


def _stamp(root: str) -> str | None:
    """The size and modification time of every file triton_key() reads (the modules of Triton's compiler, backends
    and language packages, libtriton, runtime/cache.py), as one digest; None where Triton's layout is not the one
    expected."""
    parts = []
    for sub in ("compiler", "backends", "language"):
        for folder, dirs, files in os.walk(os.path.join(root, sub)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".so")):
                    parts.append(_entry(os.path.join(folder, name)))
    libs = [name for name in os.listdir(os.path.join(root, "_C")) if name.startswith("libtriton.")]
    if len(libs) != 1:
        return None
    parts += [_entry(os.path.join(root, "_C", libs[0])), _entry(os.path.join(root, "runtime", "cache.py"))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _entry(path: str) -> str:
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _root() -> str:
    import triton
    return os.path.dirname(os.path.abspath(triton.__file__))


def store(path: str | None) -> bool:
    """Compute the digest and write it to `path` with its stamp (the judge's warm-up process); False where it could
    not be done."""
    if not path:
        return False
    try:
        from triton.runtime.cache import triton_key
        stamp = _stamp(_root())
        if stamp is None:
            return False
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            json.dump({"stamp": stamp, "key": triton_key()}, fh)
        os.replace(tmp, path)
        return True
    except Exception:  # noqa: BLE001 - a Triton without this function or layout: workers compute it themselves
        return False


def load(path: str | None) -> bool:
    """Hand Triton the stored digest where its stamp matches the installed files (a worker, before its candidate is
    imported); True when it did."""
    if not path:
        return False
    try:
        with open(path) as fh:
            doc = json.load(fh)
        import triton.runtime.cache as cache
        if not (isinstance(doc, dict) and isinstance(doc.get("key"), str) and doc.get("stamp") == _stamp(_root())):
            return False
        known = doc["key"]

        def triton_key() -> str:
            return known
        cache.triton_key = triton_key
        return True
    except Exception:  # noqa: BLE001 - missing, unreadable or stale: Triton computes it at its first compile
        return False
