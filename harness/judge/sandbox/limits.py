"""Process-level bounds put on a worker in the forked child before exec: capabilities, resource limits, and who
the kernel's OOM killer takes first.

Capabilities: a judge running as root (the GPU runners do) would otherwise hand its worker every capability, and
with them the means to undo the rest (CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_SYS_RESOURCE to raise its own limits).
The worker keeps uid 0 where the judge has it (the device nodes, the interpreter and the checkout stay readable)
but holds no capability, cannot regain one through exec (securebits NOROOT, locked; an empty bounding set), and
Landlock still refuses what uid 0's file ownership would allow.
"""
from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal
import struct

from .seccomp import prctl

PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT = 1, 24, 28, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT | _LOCKED, SECBIT_NO_SETUID_FIXUP | _LOCKED, SECBIT_KEEP_CAPS_LOCKED,
# SECBIT_NO_CAP_AMBIENT_RAISE | _LOCKED
SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Limits:
    """The numbers, chosen in the judge. `files`: open descriptors; `file_bytes`: the largest file it may write;
    `tasks`: RLIMIT_NPROC, threads of its uid counted system-wide (a backstop against a fork bomb between two of the
    watchdog's looks; the watchdog's own process bound is the tight one)."""

    def __init__(self, files: int = 4096, file_bytes: int = 1 << 30, tasks: int | None = None):
        self.files, self.file_bytes = files, file_bytes
        self.tasks = tasks if tasks is not None else _uid_tasks() + 4096

    def as_record(self) -> dict:
        return {"open_files": self.files, "file_bytes": self.file_bytes, "uid_tasks": self.tasks}


def _uid_tasks() -> int:
    """Threads (tasks) that belong to this real uid now: RLIMIT_NPROC counts them all, not just the worker's."""
    uid, n = os.getuid(), 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0
    for pid in pids:
        try:
            st = os.stat(f"/proc/{pid}")
            if st.st_uid == uid:
                n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return n


def apply(limits: Limits) -> None:
    """In the child, before exec. Raises OSError where a bound cannot be set (setrlimit only lowers here)."""
    for what, value in ((resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_NOFILE, limits.files),
                        (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, limits.tasks)):
        soft, hard = resource.getrlimit(what)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(what, (cap, cap))
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)          # a killed judge leaves no worker holding the GPU
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:    # out of host memory, the kernel kills a worker first
            fh.write("1000")
    except OSError:
        pass


def drop_capabilities() -> int:
    """Empty every capability set, for good. Returns 0 or an errno. Without CAP_SETPCAP (a non-root judge) the
    bounding set and securebits cannot be changed, and need not be: there is nothing to regain."""
    root = os.geteuid() == 0
    if root:
        for cap in range(64):
            if prctl(PR_CAPBSET_DROP, cap) < 0 and ctypes.get_errno() == 22:    # EINVAL: past the last capability
                break
        if prctl(PR_SET_SECUREBITS, SECUREBITS) < 0:
            return ctypes.get_errno() or 1
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    nr = SYS_CAPSET.get(platform.machine())
    if nr is None:
        return 0 if not root else 95          # EOPNOTSUPP: we do not know capset's number here
    header = ctypes.create_string_buffer(struct.pack("=Ii", CAP_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(bytes(24), 24)
    if _libc.syscall(ctypes.c_long(nr), header, data) < 0:
        return ctypes.get_errno() or 1
    return 0
