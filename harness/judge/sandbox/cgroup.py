"""A cgroup v2 memory controller around each worker, where the runner delegates one: the kernel's own bound on the
worker's memory, which charges what no look at /proc can sum (shared memory, memfds, pages of descriptors held only
in flight inside a UNIX socket, socket buffers) and acts at once instead of at the watchdog's next look.

The judge makes a group of its own beneath the cgroup it runs in (`gauntlet-<judge pid>-<n>`), sets memory.max to
the worker's RAM bound (gauntlet.judge.process.watchdog.Bounds) and memory.swap.max to 0, and the forked worker
moves itself into it before exec (Confinement.preexec), so everything it and its descendants ever charge counts.
Past the bound the kernel's OOM killer kills inside the group only; the judge reads memory.events (`oom_kill`) and
says so: `crash`, naming the bound. The group is removed with the worker.

Where there is no writable cgroup v2 with the memory controller delegated (cgroup v1 hosts, a container that does
not delegate), the record says so (`memory_bound`) and the watchdog's look at resident sets, memfds and unlinked
files is the only bound. Only the kernel's files under /sys/fs/cgroup are used: no dependency.

cgroup v2 enables a controller for subgroups only in a group that holds no process itself ("no internal
processes"), and a container's or a CI job's processes usually all sit in the one group they were given: enabling
the memory controller there fails (EBUSY). With GAUNTLET_CGROUP_LEAF=1 the judge then moves every process of its
group into one leaf subgroup (`gauntlet-leaf`) and enables the controller: what a container that owns its group
does, and not done by default, since it moves processes that are not the judge's own (on a desk, a session's).

May import: the standard library only.
"""
from __future__ import annotations

import errno
import itertools
import os

GIB = 1 << 30
_count = itertools.count()


def _mounts() -> list[str]:
    """cgroup2 mount points, from /proc/self/mountinfo."""
    out = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    out.append(left.split()[4])
    except OSError:
        pass
    return out


def _own_group() -> str | None:
    """This process's cgroup v2 path ("0::/path" in /proc/self/cgroup)."""
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return line.strip()[3:]
    except OSError:
        pass
    return None


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def parent() -> tuple[str | None, str]:
    """(the folder a worker's group is made in, '') or (None, why there is none)."""
    own = _own_group()
    mounts = _mounts()
    if not mounts or own is None:
        return None, "no cgroup v2 mounted here"
    for mount in mounts:
        folder = os.path.join(mount, own.lstrip("/"))
        if not os.path.isdir(folder):
            continue
        if "memory" not in _read(os.path.join(folder, "cgroup.controllers")).split():
            return None, "cgroup v2 is mounted, but its memory controller is not delegated here"
        if not os.access(folder, os.W_OK):
            return None, "cgroup v2 with a memory controller, not writable by the judge"
        if "memory" not in _read(os.path.join(folder, "cgroup.subtree_control")).split():
            why = _enable(folder)
            if why:
                return None, why
        return folder, ""
    return None, "this process's cgroup v2 folder was not found"


LEAF = "gauntlet-leaf"
LEAF_ENV = "GAUNTLET_CGROUP_LEAF"


def _enable(folder: str) -> str:
    """Enable the memory controller for `folder`'s subgroups: '' when done, else why not. Where the group holds
    processes (EBUSY) and LEAF_ENV is 1, they are moved into the leaf first (a few tries: a process forked meanwhile
    lands in the group again)."""
    control = os.path.join(folder, "cgroup.subtree_control")
    for _ in range(5):
        try:
            _write(control, "+memory")
            return ""
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return f"the memory controller cannot be enabled for subgroups ({exc.strerror})"
            if os.environ.get(LEAF_ENV) != "1":
                return (f"the memory controller cannot be enabled for subgroups ({exc.strerror}: the judge's cgroup "
                        f"holds processes; {LEAF_ENV}=1 moves them into a leaf subgroup, as a container or CI job "
                        "that owns its cgroup may)")
            _move_into_leaf(folder)
    return "the memory controller cannot be enabled for subgroups (processes kept arriving in the judge's cgroup)"


def _move_into_leaf(folder: str) -> None:
    leaf = os.path.join(folder, LEAF)
    os.makedirs(leaf, exist_ok=True)
    for pid in _read(os.path.join(folder, "cgroup.procs")).split():
        try:
            _write(os.path.join(leaf, "cgroup.procs"), pid)
        except OSError:           # gone meanwhile, or a process the kernel will not move: the next try says so
            pass


class Group:
    """One worker's memory group, or the reason there is none (`path` None, `why` says)."""

    def __init__(self, ram_bytes: int):
        self.ram_bytes, self.path = ram_bytes, None
        folder, self.why = parent()
        if folder is None:
            return
        path = os.path.join(folder, f"gauntlet-{os.getpid()}-{next(_count)}")
        try:
            os.mkdir(path)
            _write(os.path.join(path, "memory.max"), str(ram_bytes))
            if os.path.exists(os.path.join(path, "memory.swap.max")):
                _write(os.path.join(path, "memory.swap.max"), "0")
            self.path = path
        except OSError as exc:
            self.why = f"a memory group could not be made ({exc.strerror})"
            self._rmdir(path)

    def describe(self) -> str:
        """For the record (`memory_bound`)."""
        if self.path is None:
            return f"rss watch only ({self.why})"
        return f"cgroup v2 memory.max {self.ram_bytes / GIB:.1f} GiB"

    def join(self) -> None:
        """In the forked worker, before exec (before any candidate code): move this process into the group."""
        if self.path is not None:
            _write(os.path.join(self.path, "cgroup.procs"), str(os.getpid()))

    def oom_kills(self) -> int:
        for line in _read(os.path.join(self.path, "memory.events")).splitlines() if self.path else []:
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value or 0)
        return 0

    def tripped(self) -> str | None:
        """The bound's reason when the kernel killed inside the group, else None."""
        if self.path is None or not self.oom_kills():
            return None
        return (f"host memory limit: the kernel's memory controller killed a process of the worker at its bound "
                f"(cgroup v2 memory.max {self.ram_bytes / GIB:.1f} GiB; it charges memfds and socket buffers too)")

    def remove(self) -> None:
        """After the worker's whole tree is dead (a group with processes in it cannot be removed)."""
        if self.path is not None:
            self._rmdir(self.path)

    @staticmethod
    def _rmdir(path: str) -> None:
        try:
            os.rmdir(path)
        except OSError:
            pass
