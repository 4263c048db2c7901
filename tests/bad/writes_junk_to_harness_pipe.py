"""Known-bad: finds the harness's private pipe to the parent among its own file descriptors (/proc/self/fd, write
ends of pipes) and writes junk into it before returning a wrong answer, trying to desynchronise or break the
judge's reader. The parent reads an 8-byte length (here 0xffff...: far above the header limit) and rejects the
malformed message. Expected: tampering."""
import fcntl
import os

import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"


def _pipe_write_fds():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if target.startswith("pipe:") and flags & os.O_ACCMODE == os.O_WRONLY:
            fds.append(fd)
    return fds


def solve(a, b):
    for fd in _pipe_write_fds():
        try:
            os.write(fd, b"\xff" * 64)
        except OSError:
            pass
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
