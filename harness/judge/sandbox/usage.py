"""What a worker's processes use, read from /proc and the filesystem outside them, for the judge's watchdog
(gauntlet.judge.process.watchdog): resident and proportional memory, threads, the scratch dir's disk, and what is
held through open descriptors alone.

Held through descriptors: a memfd written and unmapped (shared-memory pages in no process's mappings until the
descriptor closes) and a scratch file unlinked while open (or made with O_TMPFILE), which neither a resident set nor
a walk of the scratch dir sees. Read from each process's /proc/PID/fd at the disk check's pace. Each file counts
once, by (device, inode), however many descriptors or processes hold it; `skip` names files counted elsewhere (the
judge's shared blob area, gauntlet.protocol.Area). A descriptor in flight inside a UNIX socket (sent and not yet
received) is in no fd folder: the known remainder of this class, held only while the worker lives (its sockets
close with it), each file at most RLIMIT_FSIZE (gauntlet.judge.sandbox.limits).

May import: the standard library only.
"""
from __future__ import annotations

import os


def rss_threads(pid: int) -> tuple[int, int]:
    """(resident bytes, threads) of `pid` from /proc/PID/stat (readable whatever the process does); (0, 0) where it
    has exited."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[21]) * os.sysconf("SC_PAGE_SIZE"), int(fields[17])
    except (OSError, ValueError, IndexError):
        return 0, 0


def pss(pid: int, rss: int) -> int:
    """The proportional set size of `pid`, or its resident set `rss` where smaps_rollup cannot be read by this
    judge (an over-count, never a miss); 0 where it has exited."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except PermissionError:
        return rss
    except (OSError, ValueError, IndexError):
        pass
    return 0


def scratch_usage(folder: str, max_entries: int) -> tuple[int, int]:
    """(bytes, entries) under `folder`, counting stops past max_entries."""
    total = entries = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames:
            entries += 1
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
            if entries > max_entries:
                return total, entries
        entries += len(dirnames)
    return total, entries


def _fd_links(pid: int) -> list[tuple[str, str]]:
    """(path in /proc, link target) for each open descriptor of `pid`; [] where it has exited."""
    folder = f"/proc/{pid}/fd"
    out = []
    try:
        names = os.listdir(folder)
    except PermissionError:
        raise
    except OSError:                 # exited, or exiting
        return out
    for name in names:
        path = f"{folder}/{name}"
        try:
            out.append((path, os.readlink(path)))
        except OSError:
            continue
    return out


def held(pids: list[int], skip: set[tuple[int, int]] = frozenset()) -> tuple[int, int]:
    """(bytes in memfds, bytes in unlinked files) held open by `pids`. PermissionError propagates: a fd folder the
    judge may not read is one whose holdings it cannot bound (the worker's seccomp filter refuses the
    prctl(PR_SET_DUMPABLE) that would cause it; the caller treats it as over the bound)."""
    seen = set(skip)
    ram = disk = 0
    for pid in pids:
        for path, target in _fd_links(pid):
            is_memfd = target.startswith("/memfd:")
            if not is_memfd and not (target.startswith("/") and target.endswith(" (deleted)")):
                continue
            try:
                st = os.stat(path)              # follows the magic link to the open file itself
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key in seen or not (st.st_mode & 0o170000 == 0o100000):
                continue
            seen.add(key)
            if is_memfd:
                ram += st.st_blocks * 512
            else:
                disk += st.st_blocks * 512
    return ram, disk
