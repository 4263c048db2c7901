"""The judge's cache folder (`GAUNTLET_CACHE`, else `$XDG_CACHE_HOME/gauntlet`, else `~/.cache/gauntlet`), outside
every worker's scratch folder, so no confined worker can write it; and its small JSON documents (the card's ceilings,
the interpreter check's stamps), read whole and replaced atomically. Nothing in it is needed for a verdict to be
right: a document that cannot be read is empty, one that cannot be written is measured again next time."""
from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path


def cache_root() -> Path:
    explicit = os.environ.get("GAUNTLET_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gauntlet"


def read_json(name: str) -> dict:
    """The document `name` in the cache folder, or {} where there is none (or it is not a JSON object)."""
    try:
        doc = json.loads((cache_root() / name).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def write_json(name: str, doc: dict) -> None:
    """Replace the document `name` at once (a temporary file renamed over it); silently nothing where the folder
    cannot be written."""
    path = cache_root() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.stem}-{os.getpid()}{path.suffix}")
        tmp.write_text(json.dumps(doc, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass


def flock_within(fd: int, how: int, limit_s: float, first_pause_s: float = 0.005) -> bool:
    """Take the flock(2) lock `how` (LOCK_SH or LOCK_EX) on `fd` within `limit_s` seconds; False when the time ran
    out. Polled, with pauses doubling up to 50 ms: a blocking flock could not be bounded in time without a signal,
    and a lock in this folder may be held by anyone the judge's user runs (a candidate that opened the file can only
    delay). Shared by the GPU turns (gauntlet.judge.timing.turns) and the bytecode cache's warming (bytecode)."""
    deadline = time.monotonic() + limit_s
    pause = first_pause_s
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def holders(fd: int) -> list[int]:
    """The pids that hold a flock on the file behind `fd` (from /proc/locks), for the error message."""
    try:
        st = os.fstat(fd)
        wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        out = []
        for line in Path("/proc/locks").read_text().splitlines():
            parts = line.split()
            if "->" in parts:
                continue                    # a waiter, not a holder
            if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == wanted:
                out.append(int(parts[4]))
        return sorted(set(out))
    except (OSError, ValueError, IndexError):
        return []


# -- a candidate file's own compiled kernels, kept for its next judgement ------------------------------------------
#
# Triton (and CuPy/NVRTC) compile every kernel a worker launches into the worker's scratch folder, which goes with the
# worker: a file judged again (CI on every push, a re-run of a leaderboard) would compile it all again, seconds of every
# judgement (docs/benchmarks.md, "One eval"). So the judge keeps what a candidate's worker compiled, under the file's
# digest, and seeds the next worker for that very file with it. Why this gives a candidate nothing: the entries came
# from its own process (code it wrote, run as it chose) and go only to workers that run the same bytes; never to another
# file, never to a baseline. Entries are copied in by the judge after the worker's whole tree is dead (regular files
# only, bounded in size), into a folder no confined worker can write; without Landlock (--sandbox off, or a kernel that
# offers none) a worker could write this folder for any digest, so no cache is kept or seeded there.

COMPILED = "compiled"                     # folder under the cache root: one subfolder per candidate file digest
COMPILER_DIRS = {"TRITON_CACHE_DIR": ".triton", "CUPY_CACHE_DIR": ".cupy"}   # where a worker's compilers write
MAX_ENTRY_BYTES = 64 << 20                # one compiled kernel's files: a cubin and its metadata, a launcher .so
MAX_FILE_BYTES = 256 << 20                # all of one candidate file's entries (on disk)
MAX_FILES_KEPT = 256                      # candidate files whose kernels are kept; the least recently judged go


def compiled_key(path, fmt: str) -> str | None:
    """The cache key for a candidate file: its bytes' digest and its format (None where it cannot be read)."""
    import hashlib
    try:
        data = Path(path).read_bytes()
    except (OSError, TypeError):
        return None
    return hashlib.sha256(fmt.encode() + b"\0" + data).hexdigest()


def seed_compiled(key: str, home: str) -> int:
    """Copy what earlier workers for `key` compiled into the scratch folder `home` (before the worker starts);
    the number of entries seeded. A damaged entry is skipped: the compiler then builds that kernel again."""
    import shutil
    folder = cache_root() / COMPILED / key
    seeded = 0
    for sub in COMPILER_DIRS.values():
        source = folder / sub
        if not source.is_dir():
            continue
        for entry in source.iterdir():
            if entry.name.startswith("."):       # another judge's copy, not yet renamed in
                continue
            target = Path(home) / sub / entry.name
            try:
                if entry.is_dir():
                    shutil.copytree(entry, target)
                    _rehome_groups(target)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(entry, target)
                seeded += 1
            except OSError:
                shutil.rmtree(target, ignore_errors=True)
    try:
        os.utime(folder)                    # recently judged: kept longest
    except OSError:
        pass
    return seeded


def _rehome_groups(entry: Path) -> None:
    """Triton finds a compiled kernel through its group file (`__grp__NAME.json`), which names each of the kernel's
    files by absolute path: paths into the cache folder of the worker that compiled it, deleted with that worker.
    Seeded as it was kept, every group would point nowhere, and Triton would compile every kernel again, a fraction
    of a second for each specialization (docs/benchmarks.md, "One eval"). Each path is pointed at the
    copy beside the group file in this worker's folder; only the file's own name is taken from what the worker wrote,
    so a group can name no file outside its entry. A group that cannot be read is removed: Triton then compiles that
    kernel again, as it would without a cache."""
    for group in entry.glob("__grp__*.json"):
        try:
            paths = json.loads(group.read_text())["child_paths"]
            fixed = {}
            for name, path in paths.items():
                own = os.path.basename(str(path))
                if own and (entry / own).is_file():
                    fixed[str(name)] = str(entry / own)
            group.write_text(json.dumps({"child_paths": fixed}))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            group.unlink(missing_ok=True)


def harvest_compiled(key: str, home: str) -> int:
    """Keep the entries a dead worker's compilers left in `home` that `key`'s folder lacks; the number kept. An
    entry is a file, or a folder of files, at the top of a compiler's folder (both compilers name them by a hash
    of what they compiled); links, special files, deeper folders and oversized entries are left behind."""
    from ..sandbox.usage import scratch_usage
    folder = cache_root() / COMPILED / key
    kept, total = 0, scratch_usage(str(folder), 1 << 30)[0]     # what the file's entries take on disk already
    for sub in COMPILER_DIRS.values():
        source = Path(home) / sub
        if source.is_symlink():             # the worker's own folder, not one it points the judge at
            continue
        try:
            entries = sorted(os.scandir(source), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            size = _entry_bytes(entry)
            if size is None or size > MAX_ENTRY_BYTES or total + size > MAX_FILE_BYTES:
                continue
            if (folder / sub / entry.name).exists() or not _keep_entry(entry, folder / sub):
                continue
            kept, total = kept + 1, total + size
    if kept:
        _forget_oldest()
    return kept


def _entry_bytes(entry: os.DirEntry) -> int | None:
    """An entry's size: a regular file, or a folder holding regular files only; None for anything else."""
    try:
        if entry.is_file(follow_symlinks=False):
            return entry.stat(follow_symlinks=False).st_size
        if not entry.is_dir(follow_symlinks=False):
            return None
        total = 0
        for item in os.scandir(entry.path):
            if not item.is_file(follow_symlinks=False):
                return None
            total += item.stat(follow_symlinks=False).st_size
        return total
    except OSError:
        return None


def _keep_entry(entry: os.DirEntry, dest: Path) -> bool:
    """Copy one entry beside its place and rename it in: another judge keeping the same entry at the same time
    loses the rename and drops its copy, and a reader never sees half an entry."""
    import shutil
    tmp = dest / f".{entry.name}.{os.getpid()}.tmp"
    try:
        dest.mkdir(parents=True, exist_ok=True, mode=0o700)
        if entry.is_dir(follow_symlinks=False):
            tmp.mkdir()
            for item in os.scandir(entry.path):
                _copy_regular(item.path, tmp / item.name)
        else:
            _copy_regular(entry.path, tmp)
        os.rename(tmp, dest / entry.name)
        return True
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        return False


def _copy_regular(src: str, dst: Path) -> None:
    """Copy a file that must be a regular file when opened (O_NOFOLLOW; a file swapped for a FIFO is refused)."""
    import stat as st
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not st.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{src}: not a regular file")
        with open(fd, "rb", closefd=False) as fin, open(dst, "xb") as fout:
            while chunk := fin.read(1 << 20):
                fout.write(chunk)
    finally:
        os.close(fd)


def _forget_oldest() -> None:
    """Keep the MAX_FILES_KEPT most recently judged files' kernels."""
    import shutil
    root = cache_root() / COMPILED
    try:
        folders = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in folders[MAX_FILES_KEPT:]:
        shutil.rmtree(old, ignore_errors=True)
