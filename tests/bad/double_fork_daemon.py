"""Known-bad: the classic daemon double fork. solve forks; the child calls setsid() and forks again, then exits at
once; solve reaps it. The grandchild is re-parented to init (or the nearest subreaper) and lives on in its own
session: it is neither in the worker's process group (killpg does not reach it) nor among the worker's children
(/proc/self/task/*/children does not list it). Here it only sleeps 20 s with its descriptors closed, standing in for
work that outlives the judge (finishing outputs after timing, mining, exfiltration). Today nothing reports it.
Detection needs the process tree rooted at the worker tracked by something it cannot leave: a cgroup (systemd-run
--scope / cgroup v2 with cgroup.procs checked after each call), a PID namespace (unshare --pid --fork: when the
namespace's init dies every process in it dies), or PR_SET_CHILD_SUBREAPER on the worker's parent so orphans come
back to the judge, which can then list them. Expected: background_work."""
import os
import time

import torch

BACKEND = "torch"
EXPECTED = "background_work"
DEVICE = "cpu"


def solve(a, b):
    c = torch.matmul(a, b)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.closerange(3, 4096)
                time.sleep(20)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)                  # reap the middle process: no zombie, no child left to see
    return c
