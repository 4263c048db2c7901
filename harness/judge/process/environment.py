"""The interpreter the judge and its workers start from, verified: the installed files of the packages every
verdict runs through (torch, triton, numpy, hypothesis, PyYAML, cupy, the CUTLASS DSL, Gauntlet itself when
installed) match their wheel's install record (RECORD's sha256), and the `.pth` files of every site folder (code
any Python start-up runs) are listed with their digests.

Why: a candidate that could write into site-packages (an unconfined run, `--sandbox off`) could leave a `.pth` file
or an edited `torch/__init__.py` behind that runs in every later judge and worker: a zeros kernel recorded as pass,
torch.matmul slowed in later baseline workers. The sandbox makes that write impossible; this check finds one that
happened before (or by other hands). A modified package file is refused (`--sandbox require`) or recorded; the
`.pth` digests are part of the fingerprint, so a new one re-judges resumed records.

Only Python sources and `.pth` files are hashed (a few thousand files, tens of MB: about a second at most;
docs/benchmarks.md, "Figures moved from docstrings"); shared libraries are not. Measured once per process, and a file
that matched its record is not hashed again while its size, inode, mtime and ctime stay as they were (the judge's cache,
`verified.json`): no process of an ordinary user can set a file's ctime back, so a file written since is always hashed
again.
"""
from __future__ import annotations

import base64
import csv
import functools
import hashlib
import importlib.metadata as md
import site
import sys
from pathlib import Path

from . import cache

PACKAGES = ("torch", "triton", "numpy", "hypothesis", "PyYAML", "cupy-cuda13x", "cupy-cuda12x",
            "nvidia-cutlass-dsl", "gauntlet")


def _hash(path: Path, mode: str) -> str:
    digest = hashlib.new(mode, path.read_bytes()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _record(dist) -> list[tuple[str, str, str]]:
    """(path as recorded, hash mode, hash value) of every hashed `.py` and `.pth` file in a distribution's RECORD,
    read with csv: importlib.metadata's `files` builds a path object per entry (torch has about 20,000), which would
    be most of this check's time once the stamps below spare the hashing."""
    text = dist.read_text("RECORD") or ""
    out = []
    for row in csv.reader(text.splitlines()):
        if len(row) >= 2 and row[1] and row[0].endswith((".py", ".pth")):
            mode, _, value = row[1].partition("=")
            out.append((row[0], mode, value))
    return out


def _check_dist(name: str, seen: dict) -> tuple[int, list[str]]:
    """`seen`: path -> stat stamp of files that matched their record before (read and updated)."""
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return 0, []
    checked, modified = 0, []
    base = Path(dist.locate_file(""))
    for recorded, mode, value in _record(dist):
        path = base / recorded
        try:
            stamp = _stamp(path, value)
            ok = seen.get(str(path)) == stamp or _hash(path, mode) == value
        except (OSError, ValueError):
            ok, stamp = False, None
        checked += 1
        if ok:
            seen[str(path)] = stamp
        else:
            seen.pop(str(path), None)
            modified.append(f"{name}: {recorded}")
    return checked, modified


def _stamp(path: Path, expected: str) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}:{expected}"


def _site_dirs() -> list[str]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and p not in dirs]
    return [d for d in dirs if Path(d).is_dir()]


def pth_files() -> dict[str, str]:
    """Every `.pth` file Python's start-up would run, with its sha256."""
    out = {}
    for folder in _site_dirs():
        for path in sorted(Path(folder).glob("*.pth")):
            try:
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            except OSError:
                out[str(path)] = "unreadable"
    return out


@functools.lru_cache(maxsize=1)
def verify() -> dict:
    """{"verified": bool, "files_checked": n, "modified": [...], "pth": {path: digest}}."""
    checked, modified = 0, []
    seen = cache.read_json("verified.json")
    before = dict(seen)
    for name in PACKAGES:
        n, bad = _check_dist(name, seen)
        checked += n
        modified += bad
    if seen != before:
        cache.write_json("verified.json", seen)
    return {"verified": not modified and checked > 0, "files_checked": checked, "modified": modified[:20],
            "pth": pth_files(), "python": sys.executable}
