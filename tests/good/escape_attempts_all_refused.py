"""An adversarial probe that passes only where the worker is confined. At import it tries one harmless instance of
each way out of its process that a same-user candidate had before the sandbox (issue 16), and refuses to import,
listing what worked, if any of them did:
- the judge's memory and descriptors: /proc/PPID/mem opened for writing (the tolerance was rewritten this way),
  /proc/PPID/fd/1 (a forged verdict printed into the judge's stdout), /proc/PPID/environ;
- a signal to the judge (signal 0: the permission check alone);
- files outside its scratch dir: site-packages (a .pth runs in every later process), the installed torch package,
  /dev/shm, the system temp dir, the checkout;
- sockets: a connection to a named UNIX socket (a same-user spawner's: tmux, systemd-run's bus), a datagram to
  one, and every family but UNIX (the network, netlink, raw packets);
- new namespaces (unshare) and a ptrace-class syscall (process_vm_readv on the judge);
- System V shared memory, semaphores and message queues, and POSIX message queues: objects of the host's IPC
  namespace that outlive the worker (host memory no bound counts; a channel to a later candidate);
- making itself undumpable (prctl PR_SET_DUMPABLE 0), which hides its memory figures from a judge not run as root.
Each attempt is reverted at once where it succeeds (a created file is removed, a descriptor closed), so a failing
run of this file damages nothing. solve itself is honest. Expected: pass."""
import ctypes
import os
import site
import socket
import tempfile

import torch

BACKEND = "torch"
EXPECTED = "pass"
DEVICE = "cpu"

_worked = []


def _try(name, fn):
    try:
        fn()
    except OSError:
        return
    _worked.append(name)


def _create_and_remove(path):
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    os.unlink(path)


def _open_close(path, flags):
    os.close(os.open(path, flags))


def _libc_or_raise(name, *args):
    """The C library's `name`(*args), or OSError where it returns -1 (every call tried here reports failure so)."""
    libc = ctypes.CDLL(None, use_errno=True)
    result = getattr(libc, name)(*args)
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _syscall_or_raise(nr, *args):
    return _libc_or_raise("syscall", nr, *args)


_pp = os.getppid()
_tag = f"gauntlet-escape-probe-{os.getpid()}"
_try("write /proc/PPID/mem", lambda: _open_close(f"/proc/{_pp}/mem", os.O_RDWR))
_try("open /proc/PPID/fd/1", lambda: _open_close(f"/proc/{_pp}/fd/1", os.O_WRONLY))
_try("read /proc/PPID/environ", lambda: _open_close(f"/proc/{_pp}/environ", os.O_RDONLY))
_try("signal the judge", lambda: os.kill(_pp, 0))
for _folder in site.getsitepackages():
    _try(f"create a file in {_folder}", lambda f=_folder: _create_and_remove(os.path.join(f, _tag + ".pth")))
_try("open torch/__init__.py for writing", lambda: _open_close(torch.__file__, os.O_WRONLY | os.O_APPEND))
_try("create a file in /dev/shm", lambda: _create_and_remove(f"/dev/shm/{_tag}"))
_try("create a file in the system temp dir",
     lambda: _create_and_remove(os.path.join(os.path.dirname(os.getcwd()), _tag)))
_try("create a file in the checkout", lambda: _create_and_remove(os.path.join(os.path.dirname(__file__), _tag)))
for _family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):
    _try(f"socket family {_family}", lambda f=_family: socket.socket(f, socket.SOCK_DGRAM).close())


def _connect_to_own_listener(kind):
    """A listening UNIX socket of its own, in its scratch dir: only a refused connect() can stop this one, so a
    pathname socket elsewhere (a tmux server's) is out of reach too."""
    path = os.path.join(os.getcwd(), f"{_tag}-{kind}.sock")
    server = socket.socket(socket.AF_UNIX, kind)
    try:
        server.bind(path)
        if kind == socket.SOCK_STREAM:
            server.listen(1)
        client = socket.socket(socket.AF_UNIX, kind)
        try:
            if kind == socket.SOCK_STREAM:
                client.connect(path)
            else:
                client.sendto(b"x", path)
        finally:
            client.close()
    finally:
        server.close()
        os.unlink(path)


_try("connect a UNIX stream socket", lambda: _connect_to_own_listener(socket.SOCK_STREAM))
_try("send a datagram to a named UNIX socket", lambda: _connect_to_own_listener(socket.SOCK_DGRAM))
if os.uname().machine == "x86_64":
    _try("unshare(CLONE_NEWUSER)", lambda: _syscall_or_raise(272, 0x10000000))
    _buf = ctypes.create_string_buffer(8)
    _iov = (ctypes.c_void_p * 2)(ctypes.addressof(_buf), 8)
    _try("process_vm_readv on the judge", lambda: _syscall_or_raise(310, _pp, _iov, 1, _iov, 1, 0))


_IPC_PRIVATE, _IPC_CREAT, _IPC_RMID = 0, 0o1000, 0
_try("create System V shared memory", lambda: _libc_or_raise(
    "shmctl", _libc_or_raise("shmget", _IPC_PRIVATE, ctypes.c_size_t(1 << 20), _IPC_CREAT | 0o600), _IPC_RMID, None))
_try("create a System V semaphore set", lambda: _libc_or_raise(
    "semctl", _libc_or_raise("semget", _IPC_PRIVATE, 1, _IPC_CREAT | 0o600), 0, _IPC_RMID))
_try("create a System V message queue", lambda: _libc_or_raise(
    "msgctl", _libc_or_raise("msgget", _IPC_PRIVATE, _IPC_CREAT | 0o600), _IPC_RMID, None))
_try("create a POSIX message queue", lambda: (
    os.close(_libc_or_raise("mq_open", f"/{_tag}".encode(), os.O_CREAT | os.O_RDWR, 0o600, None)),
    _libc_or_raise("mq_unlink", f"/{_tag}".encode())))


def _undumpable_and_back():
    zero = [ctypes.c_ulong(0)] * 3
    _libc_or_raise("prctl", 4, ctypes.c_ulong(0), *zero)      # PR_SET_DUMPABLE 0
    _libc_or_raise("prctl", 4, ctypes.c_ulong(1), *zero)      # and back


_try("make itself undumpable", _undumpable_and_back)
if _worked:
    raise ImportError("the worker is not confined; these worked: " + "; ".join(_worked))


def solve(a, b):
    return torch.matmul(a, b)
