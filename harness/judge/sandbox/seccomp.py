"""A seccomp filter for the candidate's worker: the system calls Landlock does not cover.

Landlock confines the filesystem, ptrace-class access, signals, TCP and abstract sockets. What it leaves, and this
filter refuses (with an errno, so a library that merely probes carries on):
- reaching any socket outside the worker: `connect()` is refused (ECONNREFUSED) and so is `sendto()` with an
  address, and `socket()` creates only UNIX sockets (CUDA's start-up needs one; every other family, UDP and raw
  among them, which Landlock's TCP rules do not cover, is refused). A pathname UNIX socket is how a candidate
  would reach a pre-existing spawner (a tmux server, systemd-run's bus, a container runtime) and start a process
  outside every limit; abstract ones are also closed by Landlock's scope. `socketpair()` stays: it reaches nothing.
  (`sendmsg()` with an address on an unconnected datagram socket is not filtered: it reaches a logging socket at
  most, never a spawner, which needs a connection.)
- io_uring (its operations open sockets and files without the system calls filtered here);
- reading or writing other processes' memory or descriptors (ptrace, process_vm_*, pidfd_getfd, kcmp,
  process_madvise), perf events, bpf, userfaultfd, keyrings;
- new namespaces (unshare, setns, clone with a CLONE_NEW* flag; clone3, whose flags a filter cannot read, answers
  ENOSYS so the C library falls back to clone), mounts, chroot, module and kexec loading;
- TIOCSTI / TIOCLINUX ioctls (typing into a terminal another process reads);
- prctl(PR_SET_DUMPABLE): a worker that made itself undumpable would hide its /proc/PID/smaps_rollup and fd
  folder from a judge without CAP_SYS_PTRACE (any judge not run as root), so from the watchdog's memory count;
- System V IPC (shared memory, semaphores, message queues) and POSIX message queues. Their objects belong to the
  host's IPC namespace, not to the worker: a segment or queue outlives the worker that made it (host memory no
  bound counts, up to shmmax, left behind for later judgements and their baselines) and is a channel to any other
  process of the user, a later candidate among them. Found on the CPU machine, confined: a candidate's
  `shmget(IPC_PRIVATE, ...)` segment was still listed in /proc/sysvipc/shm after its judgement. Neither CUDA,
  torch nor Triton uses them (POSIX shared memory is a file under /dev/shm, which Landlock already refuses).

A classic BPF program built here, in the judge, and installed in the forked child right before exec
(gauntlet.judge.sandbox.Confinement.preexec), so it binds the worker's interpreter from its first instruction and
everything it starts. libseccomp would build the same program, but a Python binding for it cannot be counted on (the
GPU runners have none).
"""
from __future__ import annotations

import ctypes
import errno
import platform
import struct

# <linux/filter.h>, <linux/seccomp.h>, <linux/audit.h>
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
OFF_NR, OFF_ARCH = 0, 4
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
PR_SET_DUMPABLE = 4

ARCHES = {
    "x86_64": (0xC000003E, {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
        "process_madvise": 440, "socket": 41, "connect": 42, "sendto": 44, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248,
        "request_key": 249, "userfaultfd": 323, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "unshare": 272, "setns": 308, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "open_by_handle_at": 304, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsmount": 432, "clone3": 435, "clone": 56, "ioctl": 16, "prctl": 157,
        "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66, "semtimedop": 220,
        "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240, "mq_unlink": 241}),
    "aarch64": (0xC00000B7, {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438,
        "process_madvise": 440, "socket": 198, "connect": 203, "sendto": 206, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "bpf": 280, "perf_event_open": 241, "keyctl": 219,
        "add_key": 217, "request_key": 218, "userfaultfd": 282, "mount": 40, "umount2": 39, "pivot_root": 41,
        "chroot": 51, "unshare": 97, "setns": 268, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "open_by_handle_at": 265, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsmount": 432, "clone3": 435, "clone": 220, "ioctl": 29, "prctl": 167,
        "shmget": 194, "shmat": 196, "shmctl": 195, "semget": 190, "semop": 193, "semctl": 191, "semtimedop": 192,
        "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "mq_open": 180,
        "mq_unlink": 181}),
}
SPECIAL = {"clone", "ioctl", "prctl", "clone3", "socket", "connect", "sendto", "io_uring_setup", "io_uring_enter",
           "io_uring_register"}
AF_UNIX = 1
# CUDA's start-up needs a UNIX socket of its own (cudaGetDeviceCount fails with error 304 when socket(AF_UNIX) is
# refused) but starts fine when connecting it is refused (no nvidia-persistenced to talk to).
SOCKET_DOMAINS = (AF_UNIX,)
X32_BIT = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, a2=0, a3=0, a4=0, a5=0) -> int:
    """prctl with every argument passed as an unsigned long (some options insist the unused ones are 0)."""
    args = [a if isinstance(a, ctypes.Array) else ctypes.c_ulong(a) for a in (a2, a3, a4, a5)]
    return _libc.prctl(ctypes.c_int(option), *args)


def supported() -> bool:
    """This architecture has a table here and the kernel has seccomp filters (checked without installing one:
    PR_GET_SECCOMP answers on every kernel built with seccomp)."""
    if platform.machine() not in ARCHES:
        return False
    return prctl(21) >= 0       # PR_GET_SECCOMP


def denied() -> list[str]:
    """The calls refused outright (for the record)."""
    return sorted(n for n in ARCHES.get(platform.machine(), (0, {}))[1] if n not in ("clone", "ioctl", "prctl"))


def _errno(code: int) -> int:
    return RET_ERRNO | (code & 0xFFFF)


def program(machine: str | None = None, allow: frozenset = frozenset(),
            socket_domains: tuple = SOCKET_DOMAINS) -> bytes:
    """The filter as the kernel's struct sock_filter array. `allow`: call names not to refuse; `socket_domains`:
    address families socket() may still create."""
    machine = machine or platform.machine()
    arch, nrs = ARCHES[machine]
    nrs = {k: v for k, v in nrs.items() if k not in allow or k in ("clone", "ioctl", "prctl")}
    code: list = []            # (op, jt, jf, k) with jt/jf as labels or ints; resolved below

    def emit(op, k=0, jt=0, jf=0):
        code.append([op, jt, jf, k])

    emit(LD_W_ABS, OFF_ARCH)
    emit(JEQ_K, arch, 1, 0)
    emit(RET_K, RET_KILL_PROCESS)          # another ABI's numbers mean other calls: refuse to guess
    emit(LD_W_ABS, OFF_NR)
    if machine == "x86_64":
        emit(JGE_K, X32_BIT, "eperm", 0)   # the x32 ABI's numbers alias the x86-64 ones
    if "clone" not in allow:
        emit(JEQ_K, nrs["clone"], "clone", 0)
    if "ioctl" not in allow:
        emit(JEQ_K, nrs["ioctl"], "ioctl", 0)
    if "prctl" not in allow:
        emit(JEQ_K, nrs["prctl"], "prctl", 0)
    for name in ("clone3", "io_uring_setup", "io_uring_enter", "io_uring_register"):
        if name in nrs:
            emit(JEQ_K, nrs[name], "enosys", 0)
    if "socket" in nrs:
        emit(JEQ_K, nrs["socket"], "socket", 0)
    if "connect" in nrs:
        emit(JEQ_K, nrs["connect"], "econnrefused", 0)
    if "sendto" in nrs:
        emit(JEQ_K, nrs["sendto"], "sendto", 0)
    for name, nr in sorted(nrs.items()):
        if name not in SPECIAL:
            emit(JEQ_K, nr, "eperm", 0)
    emit(RET_K, RET_ALLOW)
    labels = {}
    labels["clone"] = len(code)
    emit(LD_W_ABS, 16)                     # args[0], low word: the flags
    emit(JSET_K, CLONE_NEW, "eperm", 0)
    emit(RET_K, RET_ALLOW)
    labels["ioctl"] = len(code)
    emit(LD_W_ABS, 16 + 8)                 # args[1], low word: the request
    emit(JEQ_K, TIOCSTI, "eperm", 0)
    emit(JEQ_K, TIOCLINUX, "eperm", 0)
    emit(RET_K, RET_ALLOW)
    labels["prctl"] = len(code)
    emit(LD_W_ABS, 16)                     # args[0]: the option
    emit(JEQ_K, PR_SET_DUMPABLE, "eperm", "allow")
    labels["sendto"] = len(code)
    emit(LD_W_ABS, 16 + 8 * 4)             # args[4]: dest_addr; a datagram to a named socket is a connect too
    emit(JEQ_K, 0, 0, "eacces")
    emit(LD_W_ABS, 16 + 8 * 4 + 4)
    emit(JEQ_K, 0, "allow", "eacces")
    labels["socket"] = len(code)
    emit(LD_W_ABS, 16)                     # args[0]: the address family
    for domain in socket_domains:
        emit(JEQ_K, domain, "allow", 0)
    emit(RET_K, _errno(errno.EACCES))
    labels["allow"] = len(code)
    emit(RET_K, RET_ALLOW)
    labels["eperm"] = len(code)
    emit(RET_K, _errno(errno.EPERM))
    labels["eacces"] = len(code)
    emit(RET_K, _errno(errno.EACCES))
    labels["econnrefused"] = len(code)
    emit(RET_K, _errno(errno.ECONNREFUSED))
    labels["enosys"] = len(code)
    emit(RET_K, _errno(errno.ENOSYS))
    out = b""
    for i, (op, jt, jf, k) in enumerate(code):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        assert 0 <= jt < 256 and 0 <= jf < 256, "a BPF jump out of range"
        out += struct.pack("=HBBI", op, jt, jf, k)
    return out


class Filter:
    """The program kept alive in the judge's memory, so the forked child can point the kernel at it."""

    def __init__(self, **kw):
        self.code = program(**kw)
        self.buf = ctypes.create_string_buffer(self.code, len(self.code))
        self.fprog = struct.pack("=HxxxxxxQ", len(self.code) // 8, ctypes.addressof(self.buf))
        self.fprog_buf = ctypes.create_string_buffer(self.fprog, len(self.fprog))

    def install(self) -> int:
        """In the child, after no_new_privs. Returns 0 or an errno."""
        if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self.fprog_buf) < 0:
            return ctypes.get_errno() or 1
        return 0


def no_new_privs() -> int:
    if prctl(PR_SET_NO_NEW_PRIVS, 1) < 0:
        return ctypes.get_errno() or 1
    return 0
