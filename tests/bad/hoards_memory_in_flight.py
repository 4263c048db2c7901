"""Known-bad: host memory held where neither a resident set nor a descriptor table shows it. solve writes 3 x 512 MiB
into memfds and sends each down a UNIX socket pair it keeps (SCM_RIGHTS), then closes its own descriptors: the
files live on only in flight, in no process's fd folder, so the watchdog's look at the worker's memory and open files
(gauntlet.judge.sandbox.usage) sees none of it. A cgroup v2 memory controller charges every page of them to the
worker's group (gauntlet.judge.sandbox.cgroup). Judged by tests/test_outside_proc.py with a 1 GiB RAM bound.
Expected: crash naming the bound where the runner delegates cgroup v2 memory; elsewhere the record must say the
bound was not in force (`memory_bound`: "rss watch only ...")."""
import array
import os
import socket
import time

import torch

BACKEND = "torch"
_kept = []


def _send_fd(sock, fd):
    sock.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])


def solve(a, b):
    if not _kept:
        left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        _kept.extend([left, right])
        chunk = b"\1" * (64 << 20)
        for _ in range(3):
            fd = os.memfd_create("in-flight")
            for _ in range(8):          # 512 MiB, through the descriptor: never mapped
                os.write(fd, chunk)
            _send_fd(left, fd)
            os.close(fd)                # now only in flight inside the socket pair
        time.sleep(1.5)                 # the watchdog looks meanwhile
    return torch.matmul(a, b)
