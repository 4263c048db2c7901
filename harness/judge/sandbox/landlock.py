"""Landlock (Linux >= 5.13), through its three system calls: the candidate's worker may write only beneath its own
scratch directory and a few device nodes, may not trace, read the memory or descriptors of, or signal any process
outside its own domain, and may not bind or connect TCP sockets or reach abstract UNIX sockets outside it.

Why Landlock: it is the kernel's own unprivileged sandbox, it binds root as well (the GPU runners judge as root),
and a restriction, once in force, is inherited by every thread and process the candidate starts and cannot be lifted
from inside. No Python binding is packaged for it, so this is the small amount of ctypes it takes; every constant is
from <linux/landlock.h>. The ruleset is built in the judge (paths opened there) and put in force in the forked child
just before it executes the worker's interpreter (gauntlet.judge.sandbox.Confinement.preexec).

What each ABI adds, and what is confined where it is missing:
  1  filesystem writes (and, always, ptrace-class access to processes outside the domain: /proc/PID/mem, fds)
  2  REFER (renames/links across folders)          3  TRUNCATE
  4  TCP bind/connect                               5  device ioctls (not used: CUDA needs its ioctls)
  6  scopes: signals and abstract UNIX sockets      7  audit logging (not used)
"""
from __future__ import annotations

import ctypes
import os
import struct

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446    # the same number on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

FS = {name: 1 << i for i, name in enumerate((
    "EXECUTE", "WRITE_FILE", "READ_FILE", "READ_DIR", "REMOVE_DIR", "REMOVE_FILE", "MAKE_CHAR", "MAKE_DIR",
    "MAKE_REG", "MAKE_SOCK", "MAKE_FIFO", "MAKE_BLOCK", "MAKE_SYM", "REFER", "TRUNCATE", "IOCTL_DEV"))}
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2

# What the candidate may not do anywhere but where a rule allows it: every kind of write. Reading, executing and
# device ioctls stay allowed everywhere (the interpreter, torch, CUDA and ptxas need them).
_WRITE_V1 = ("WRITE_FILE", "REMOVE_DIR", "REMOVE_FILE", "MAKE_CHAR", "MAKE_DIR", "MAKE_REG", "MAKE_SOCK",
             "MAKE_FIFO", "MAKE_BLOCK", "MAKE_SYM")
# Rights that apply to a file (not a folder): a rule on a device node may grant only these.
_FILE_RIGHTS = ("EXECUTE", "WRITE_FILE", "READ_FILE", "TRUNCATE", "IOCTL_DEV")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi() -> int:
    """The Landlock ABI this kernel offers; 0 where it has none (or it is disabled at boot)."""
    try:
        version = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (AttributeError, OSError):
        return 0
    return max(0, int(version))


def handled_fs(version: int) -> int:
    names = list(_WRITE_V1) + (["REFER"] if version >= 2 else []) + (["TRUNCATE"] if version >= 3 else [])
    return sum(FS[n] for n in names)


def _error(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"landlock {what}: {os.strerror(err)}")


class Ruleset:
    """A ruleset under construction in the judge; `fd` is handed to the child, which puts it in force."""

    def __init__(self, version: int):
        self.version = version
        self.fs = handled_fs(version)
        net = (NET_BIND_TCP | NET_CONNECT_TCP) if version >= 4 else 0
        scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if version >= 6 else 0
        attr = struct.pack("=QQQ", self.fs, net, scoped)
        size = 24 if version >= 6 else 16 if version >= 4 else 8
        buf = ctypes.create_string_buffer(attr[:size], size)
        fd = _libc.syscall(SYS_CREATE_RULESET, buf, ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise _error("create_ruleset")
        self.fd = int(fd)
        self.tcp_denied = bool(net)
        self.scoped = bool(scoped)

    def allow_beneath(self, path: str, directory: bool = True) -> bool:
        """Every handled right beneath a folder (the scratch dir), or the file rights on one file (a device node).
        False when the path does not exist."""
        rights = self.fs if directory else self.fs & sum(FS[n] for n in _FILE_RIGHTS)
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, pfd), 12)   # packed in the kernel too
            if _libc.syscall(SYS_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(RULE_PATH_BENEATH), attr,
                             ctypes.c_uint32(0)) < 0:
                raise _error(f"add_rule {path}")
        finally:
            os.close(pfd)
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def restrict_self(fd: int) -> int:
    """In the child, after no_new_privs: put the ruleset in force for this thread and whatever it starts. Returns 0
    or an errno (the child cannot raise usefully before exec)."""
    if _libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
        return ctypes.get_errno() or 1
    return 0
