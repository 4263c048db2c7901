"""Facts about a candidate's worker that the judge observes from outside its process, gathered around each request
(gauntlet.judge.process.isolate.Child.request): its tasks (gauntlet.judge.sandbox.tasks), its end of the channel
(gauntlet.judge.sandbox.channel), and its memory group (gauntlet.judge.sandbox.cgroup). The worker's own
in-process checks (gauntlet.child.guard) stay as a first line; these decide where they disagree.

May import: the standard library only.
"""
from __future__ import annotations

import os
import random
import select
import time

from .cgroup import Group
from .channel import Channel, Handed, handed
from .tasks import TaskWatch

CARRIES_BACKGROUND = ("case", "bench_batch")   # the replies whose `background` the judge turns into a verdict
MIDWAY_MAX_S = 0.25


def handed_fds(req_r: int, req_w: int, resp_r: int, resp_w: int, area_fd: int | None) -> list[Handed]:
    """The descriptors a worker is handed (its numbers are the judge's before it closes its copies)."""
    fds = [handed(req_r, "request", req_w, os.O_RDONLY), handed(resp_w, "reply", resp_r, os.O_WRONLY)]
    return fds + ([handed(area_fd, "blob area", area_fd, os.O_RDWR)] if area_fd is not None else [])


class Outside:
    """`ram_bytes`: the worker's memory bound, for its group (made before the fork: `group.join` runs in it)."""

    def __init__(self, ram_bytes: int, watch: bool):
        self.group, self.watch = Group(ram_bytes), watch
        self.pid, self.pids, self.channel, self.tasks = 0, None, None, None
        self.pending: list[str] = []
        self.t0 = self.last_call_s = 0.0

    def started(self, pid: int, pids, fds: list[Handed]) -> None:
        """`pids()`: the worker's tree now (itself first)."""
        self.pid, self.pids = pid, pids
        if self.watch:
            self.channel, self.tasks = Channel(fds), TaskWatch(pid, pids)

    def at_start(self, header: dict, go) -> dict:
        """The worker's first message. A candidate's worker stops once its start-up is done and before it imports
        the candidate (stage `before_import`: harness code so far, so the stage is believed): the judge reads its
        tasks then, itself, and `go()` lets it import and returns its hello. Idle time is counted from the hello."""
        if header.get("stage") == "before_import":
            if self.tasks is not None:
                self.tasks.start_up()
            header = go()
        if self.tasks is not None:
            if header.get("ok"):
                seen = self.tasks.quiet_look()
                if seen:
                    self.pending.append(seen)
            self.tasks.hello()
        return header

    def look(self) -> str | None:
        """For the watchdog's every look."""
        return self.channel.check(self.pid, closed_ok=True) if self.channel is not None else None

    def before_request(self) -> None:
        if self.tasks is not None:
            self.tasks.before_request()
        self.t0 = time.monotonic()

    def midway(self, resp_r: int, within_s: float | None = None) -> str | None:
        """Once during the call, at a random moment within the last call's duration (or within `within_s` of the
        send, where the caller knows the reply cannot come sooner): a relay that swaps the reply descriptor only
        while a call runs is swapped now."""
        if self.channel is None:
            return None
        wait = random.uniform(0.0, min(self.last_call_s if within_s is None else within_s, MIDWAY_MAX_S))
        if select.select([resp_r], [], [], wait)[0]:
            return None                   # the reply is in: checked when it is taken
        return self.channel.check(self.pid, closed_ok=True)

    def after_reply(self, op: str, header: dict) -> str | None:
        """A tampered channel (the reply is not to be believed), else None; what the tasks showed goes into the
        `background` of the next reply that carries one."""
        self.last_call_s = time.monotonic() - self.t0
        if self.channel is None:
            return None
        found = self.channel.check(self.pid)
        if found:
            return found
        seen = self.tasks.after_reply()
        if seen:
            self.pending.append(seen)
        own = header.get("background", "")
        if op in CARRIES_BACKGROUND and self.pending and header.get("ok") and isinstance(own, str):
            header["background"] = "; ".join(filter(None, [own, *self.pending]))
            self.pending = []
        return None

    def stopped_by_kernel(self) -> str | None:
        return self.group.tripped()
