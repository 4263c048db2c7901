"""A worker's threads and processes, counted by the judge from /proc, outside the worker's process: the candidate
controls everything inside it (its `threading` module, and threads started with `_thread` or natively, which
`threading.enumerate()` never lists), but not what the kernel says of its tasks.

Two rules, applied to the candidate's worker and every process of its tree (gauntlet.judge.process.isolate reads a
snapshot before each request and after each reply):
- a task (thread or process) that appeared during a call and is still there when the reply has come is left behind
  work: `background_work`, named by tid, comm and the CPU it used. Pools that torch, CUDA, the profiler and Triton
  start exist before the candidate is imported (the worker warms them in its start-up, and the judge reads the set
  of tasks itself at that moment, before the import: `start_up`), so an honest call starts none.
- between a reply and the next request the worker's main thread waits on the request pipe, and an honest worker's
  other threads sleep (an OpenMP pool spins a few ms after its last parallel region, no more). A non-main task that
  burns CPU there works while the worker is idle: a thread started at import that spins through every call, say.
  Each idle interval gives a task IDLE_GRACE_MS of CPU free; what it uses past that, summed over the judgement,
  is background work once it passes IDLE_MIN_MS and IDLE_SHARE of the idle time the sum covers.

- right after the candidate's import, before its first request, the judge watches the worker for QUIET_S: a task
  other than the main thread that uses CPU then works while nothing was asked of it (a thread started at import
  that spins). Idle intervals between calls are often too short for the rule above to see such a thread on a
  loaded host (each one's grace swallows it); this window is the judge's own, so its length does not depend on
  the load.

What remains out of reach: a pre-existing thread that works only while the main thread runs (during the call and
the harness's own work after it) is indistinguishable here from a parallel kernel's helpers; one that works at a
duty cycle under IDLE_SHARE between calls stays under the bound (it gets at most that share of the idle time); a
task that starts and ends within one call leaves nothing to see (what it did before the reply is the call's work).

May import: the standard library only.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

TICK_NS = 10**9 // os.sysconf("SC_CLK_TCK")
IDLE_GRACE_MS = 15.0       # CPU a thread may take in one idle interval: an OpenMP pool's spin after its last region
IDLE_MIN_MS = 150.0        # a task's CPU past the grace, over the judgement, before it is background work ...
IDLE_SHARE = 0.1           # ... and its share of the idle time (the grace's worth of each interval taken off)
# The quiet look after the import: a window this long, and the CPU a task may use in it (whichever is larger).
QUIET_S, QUIET_MIN_MS, QUIET_CPU_SHARE = 0.06, 6.0, 0.1


@dataclass(frozen=True)
class Task:
    pid: int
    tid: int
    comm: str
    state: str
    cpu_ns: int

    def describe(self, cpu_ns: int | None = None) -> str:
        kind = "process" if self.tid == self.pid else f"thread of pid {self.pid}"
        ms = (self.cpu_ns if cpu_ns is None else cpu_ns) / 1e6
        return f"tid {self.tid} ({kind}, comm {self.comm!r}, state {self.state}, {ms:.0f} ms CPU)"


def _cpu_ns(pid: int, tid: int, fields: list[str]) -> int:
    """On-CPU time of a task: /proc/.../schedstat's first field (nanoseconds) where the kernel keeps it, else
    utime + stime from stat (clock ticks, 10 ms). Time on a CPU only, not the run-queue wait beside it: the kernel adds
    a wait to that count when the task next gets a CPU, so a wait that built up during a call can land in the idle
    interval after it, and an honest pool thread would read as busy while the worker waited."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return (int(fields[11]) + int(fields[12])) * TICK_NS


def read_tasks(pids: list[int]) -> dict[int, Task]:
    """{tid: Task} of every task of `pids` that is alive now (zombies and exited ones left out)."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for name in tids:
            try:
                with open(f"/proc/{pid}/task/{name}/stat") as fh:
                    raw = fh.read()
                head, _, tail = raw.rpartition(")")
                fields = tail.split()
                tid = int(name)
                if fields[0] in "ZXx":
                    continue
                out[tid] = Task(pid, tid, head.partition("(")[2], fields[0], _cpu_ns(pid, tid, fields))
            except (OSError, ValueError, IndexError):
                continue
    return out


class TaskWatch:
    """The judge's count of one worker's tasks. `pids()`: the worker's tree now (the worker, its descendants, those
    that escaped it); the worker's own pid is its main thread's tid."""

    def __init__(self, main: int, pids):
        self.main, self.pids = main, pids
        self.known: dict[int, Task] = {}          # the tasks before the candidate's import (start_up)
        self.before: dict[int, Task] = {}         # at the current request
        self.last: dict[int, Task] | None = None  # at the last reply (or the hello)
        self.last_t = 0.0
        self.idle_ns: dict[int, int] = {}         # per tid: CPU past the grace, in idle intervals
        self.idle_wall_ns = 0                     # idle time those intervals covered, less each one's grace
        self.reported: set[int] = set()

    def start_up(self) -> None:
        """The tasks of a worker that has done the harness's start-up and not yet imported the candidate."""
        self.known = read_tasks(self.pids())

    def hello(self) -> None:
        """After the import: idle intervals are counted from here."""
        self.last, self.last_t = read_tasks(self.pids()), time.monotonic()

    def quiet_look(self, seconds: float = QUIET_S) -> str:
        """Right after the candidate's import, with the worker waiting for its first request: any task but the main
        thread that uses QUIET_CPU_SHARE of a window of `seconds` (at least QUIET_MIN_MS) works while nothing was
        asked of it, e.g. a thread started at import that spins. An honest worker's pools are asleep by then: the
        import ran no parallel region of theirs a moment ago. '' when nothing was seen."""
        then = read_tasks(self.pids())
        time.sleep(seconds)
        now = read_tasks(self.pids())
        floor = max(QUIET_MIN_MS * 1e6, QUIET_CPU_SHARE * seconds * 1e9)
        busy = [(t, t.cpu_ns - then[tid].cpu_ns) for tid, t in sorted(now.items())
                if tid != self.main and tid in then and then[tid].pid == t.pid and t.cpu_ns - then[tid].cpu_ns >= floor]
        if not busy:
            return ""
        self.reported.update(t.tid for t, _ in busy)
        return (f"{len(busy)} thread(s) used CPU while the worker waited for its first request, right after the "
                f"candidate's import ({seconds * 1e3:.0f} ms watched), seen in /proc by the judge: "
                + ", ".join(t.describe(ns) + self._origin(t.tid) for t, ns in busy[:5]))

    def before_request(self) -> None:
        now, t = read_tasks(self.pids()), time.monotonic()
        if self.last is not None:
            grace = IDLE_GRACE_MS * 1e6
            self.idle_wall_ns += max(0, int((t - self.last_t) * 1e9 - grace))
            for tid, task in now.items():
                old = self.last.get(tid)
                if tid != self.main and old is not None and old.pid == task.pid:
                    extra = task.cpu_ns - old.cpu_ns - grace
                    if extra > 0:
                        self.idle_ns[tid] = self.idle_ns.get(tid, 0) + int(extra)
        self.before, self.last = now, None

    def after_reply(self) -> str:
        """What the call left behind, and what worked while the worker waited: '' when nothing."""
        now = read_tasks(self.pids())
        self.last, self.last_t = now, time.monotonic()
        found = []
        new = [t for tid, t in sorted(now.items()) if tid not in self.before and tid not in self.reported]
        if new:
            self.reported.update(t.tid for t in new)
            found.append(f"{len(new)} task(s) started during the call still running after it, seen in /proc by the "
                         "judge: " + ", ".join(t.describe() for t in new[:5]))
        busy = [(tid, ns) for tid, ns in sorted(self.idle_ns.items()) if tid not in self.reported
                and ns >= IDLE_MIN_MS * 1e6 and ns >= IDLE_SHARE * self.idle_wall_ns and tid in now]
        if busy:
            self.reported.update(tid for tid, _ in busy)
            found.append(f"{len(busy)} thread(s) used CPU while the worker's main thread waited for the next request "
                         f"({self.idle_wall_ns / 1e6:.0f} ms of waiting), seen in /proc by the judge: "
                         + ", ".join(now[tid].describe(ns) + self._origin(tid) for tid, ns in busy[:5]))
        return "; ".join(found)

    def _origin(self, tid: int) -> str:
        return " present before the candidate's import" if tid in self.known else " started by the candidate's code"
