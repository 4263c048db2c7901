"""Processes seen from /proc, and signals sent to them: the judge's view of a worker's process tree (its escaped
descendants re-parented to the judge, their start times) and of whether a worker was confined so that it can
signal nothing outside its own Landlock domain. Read from outside the worker: nothing here runs beside candidate
code."""
from __future__ import annotations

import os
import signal
import subprocess
import time

from .watchdog import children, children_listed, tree

PR_SET_CHILD_SUBREAPER = 36


def prctl(option: int, arg: int) -> None:
    """Linux's prctl; a no-op elsewhere."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def become_subreaper() -> None:
    """Processes the candidate double-forks (fork + setsid, escaping its process group) are re-parented to us
    instead of init, so we can see and kill them."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def stat(pid: int):
    """(state, ppid, pgid, sid, start time in clock ticks) of a process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def signals_scoped(confinement: dict | None) -> bool:
    """A worker verified confined in a Landlock domain of its own with signals scoped (ABI 6+): it cannot signal,
    trace or write any process outside its domain (another worker of this judge included)."""
    conf = confinement or {}
    return bool(conf.get("verified")) and conf.get("signals") == "own domain only"


def adopted_orphans(known: set[int], since: int) -> list[int]:
    """Live processes re-parented to us, outside our session, started since `since` (the child's own start time):
    the candidate's escaped descendants. Zombies are reaped, not reported; older orphans belong to someone else
    (a run killed earlier in the same process, say)."""
    me, out = os.getpid(), []
    for pid in children_of(me):
        st = stat(pid)
        if not st or st[1] != me or pid in known or st[3] == os.getsid(0):
            continue
        if st[0] == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        elif st[4] >= since:
            out.append(pid)
    return out


def children_of(me: int) -> list[int]:
    """Our children, from our threads' /proc children lists (watchdog.children: microseconds); where the kernel has
    no such list, every process in /proc (milliseconds, on every stop and continue of a worker: seconds per
    judgement), which adopted_orphans narrows down by parent."""
    if children_listed():
        return children(me)
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


def signal_pid(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_group(pgid: int, sig) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# Every worker of this judge that is alive: none of them counts as another worker's escaped process.
LIVE: set[int] = set()


def escaped_cheap(started: int) -> list[int]:
    """For the watchdog's frequent looks: the judge's own children (where escapes are re-parented), not a scan
    of /proc; other live workers of this judge are not a worker's escapes."""
    mine = os.getsid(0)
    out = []
    for pid in children(os.getpid()):
        st = stat(pid)
        if pid not in LIVE and st and st[3] != mine and st[4] >= started:
            out.append(pid)
    return out


def escaped(worker: int, started: int) -> list[int]:
    """Processes that left the worker's process group and session and are still running. The judge's other
    live workers are not this one's escapes, nor are their zombies reaped here: their own Popen must see how
    they died (reaped here, a baseline worker killed by SIGKILL read as "exited with status 0")."""
    return adopted_orphans({worker} | LIVE, started)


def kill_tree(worker: int, escapes, once: bool = False) -> None:
    """SIGKILL the worker and every descendant at once (a process that left the group is still a descendant
    while the worker lives), until none is alive. `escapes()`: its escaped processes, looked at again each time.
    `once`: one round of signals, not waiting to see them dead (gauntlet.judge.process.isolate.close_all sends
    every worker's first, so that their deaths overlap)."""
    for _ in range(100):
        alive = [p for p in tree(worker, escapes()) if (stat(p) or "Z")[0] not in "ZXx"]
        if not alive:
            return
        for pid in alive:
            signal_pid(pid, signal.SIGKILL)
        if once:
            return
        time.sleep(0.005)


def kill_group(proc, escapes) -> None:
    """SIGKILL the worker's escaped processes (reaped), then its process group, and wait for the worker."""
    for pid in escapes():
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError, PermissionError):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def close_all(children: list) -> None:
    """Close workers together: every worker's whole tree is sent SIGKILL (escaped processes included), then each is
    reaped. No orderly exit is asked for: every answer of the judgement is in when a worker is closed, and that exit
    would be only the interpreter's and torch's teardown (about a second) on every judgement's way out. A killed
    worker's GPU memory is freed as its files close, which is before it can be reaped, so whatever follows finds the
    card as free as after an orderly exit. The kills go out to all first, so the teardowns overlap instead of adding
    up."""
    live = [child for child in children if child is not None and child._stop_watching()]
    for child in live:
        child._kill_tree(once=True)
    for child in live:
        child._finish_close()
