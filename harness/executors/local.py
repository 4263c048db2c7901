"""Every GPU of one host: one judge slot per GPU (`--gpus N|all`), each a process of its own that sees only its
GPU, judging one candidate at a time; this module is the one scheduler that hands the next job to whichever slot
is free.

Why processes and not threads: a GPU is chosen by CUDA_VISIBLE_DEVICES, which must be in the environment before
CUDA starts in the judge and in every worker the judge starts; one process per slot sets it once, for good, and a
fault in one slot's judge (or its memory) is not another's. Why not concurrent.futures' process pool: its workers
cannot be told apart, so none could be pinned to a GPU, and one dead worker breaks the whole pool.

A slot that dies mid-job (a harness bug, the OOM killer) costs that job an `error` record that says so, and a
fresh slot takes its place; the candidate is never blamed for it.
"""
from __future__ import annotations

import collections
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import task


class Slot:
    def __init__(self, index: int, device: str, share: int = 1):
        self.index, self.device, self.share = index, device, share
        self.job: dict | None = None
        self.next: dict | None = None      # reserved for this slot: its worker was started during `job`
        self.started = 0.0                 # monotonic time `job` was given (its wall time if the slot dies)
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=device, GAUNTLET_SLOT=str(index))
        if share > 1:      # K judges on one card: each sizes its cases to its share of the memory (judge.memory)
            env["GAUNTLET_JUDGES_PER_GPU"] = str(max(share, _judges_per_gpu()))
        # -P (3.11+): the cwd is not put ahead of the packages. Own session: a Ctrl-C at the terminal reaches the
        # driver only, which stops every slot itself (gauntlet.judge.records.interrupt).
        flags = ["-P"] if sys.version_info >= (3, 11) else []
        self.proc = subprocess.Popen([sys.executable, *flags, "-m", "gauntlet.executors.slot"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     start_new_session=True)

    def give(self, job: dict, after: dict | None = None) -> None:
        """Judge `job`; `after`: the job this slot is to judge next (its worker starts meanwhile, gated)."""
        self.job, self.next = job, after
        self.started = time.monotonic()
        if after is not None:
            self.proc.stdin.write(json.dumps({"prestart": after}) + "\n")
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def _judges_per_gpu() -> int:
    """The user's GAUNTLET_JUDGES_PER_GPU (gauntlet.gpu's parser); 1 where it is malformed, which --overlap's own
    count then replaces."""
    from .. import gpu
    try:
        return gpu.judges_per_gpu()
    except ValueError:
        return 1


class LocalExecutor:
    """`devices`: each GPU's CUDA_VISIBLE_DEVICES (gauntlet.executors.slots.slot_devices). `overlap`: slots
    per GPU. With more than one, a GPU's slots judge side by side: their correctness phases overlap, and their
    timings take turns, each with the card alone (gauntlet.judge.timing.turns), so a figure is never shared."""

    kind = "local"

    def __init__(self, devices: list[str], overlap: int = 1):
        self.overlap = max(1, overlap)
        self.devices = [d for d in devices for _ in range(self.overlap)]      # GPU 0's slots, then GPU 1's, ...
        self.gpus = len(devices)
        self.slots: list[Slot] = []

    def run(self, jobs: list[dict], on_start=None):
        """Yield (job, result) as each finishes, in whatever order they finish; `on_start(job, where)` is told
        when a slot takes a job."""
        pending = collections.deque(jobs)
        if not self.slots:
            self.slots = [Slot(i, d, self.overlap) for i, d in enumerate(self.devices[:max(1, len(jobs))])]
        with selectors.DefaultSelector() as sel:
            while True:
                for slot in self.slots:
                    if slot.job is None and (slot.next is not None or pending):
                        job = slot.next if slot.next is not None else pending.popleft()
                        # A next job is reserved only where no idle slot is left wanting one.
                        hungry = sum(1 for s in self.slots if s.job is None and s.next is None and s is not slot)
                        slot.give(job, pending.popleft() if len(pending) > hungry else None)
                        sel.register(slot.proc.stdout, selectors.EVENT_READ, slot)
                        if on_start:
                            on_start(job, {"executor": "local", "slot": slot.index, "device": slot.device})
                if not any(slot.job is not None for slot in self.slots):
                    return
                for key, _ in sel.select():
                    slot = key.data
                    line = slot.proc.stdout.readline()
                    sel.unregister(slot.proc.stdout)
                    job, slot.job = slot.job, None
                    if line:
                        yield job, json.loads(line)
                    else:
                        yield job, self._lost(slot, job)

    def _lost(self, slot: Slot, job: dict) -> dict:
        """The slot died under a job: that job's record says so (the harness's failure, not the candidate's,
        whose workers are confined apart), and a fresh slot takes the GPU."""
        code = slot.proc.wait()
        slot.close()
        self.slots[slot.index] = Slot(slot.index, slot.device, slot.share)
        self.slots[slot.index].next = slot.next      # the job reserved for the dead slot: the fresh one's next
        detail = (f"harness error: the judge slot of GPU {slot.device} died (exit status {code}) while judging; "
                  "not a verdict on the candidate")
        return {"index": job["index"], "record": task.harness_error(job, job["options"]["device"], detail),
                "peaks": {}, "where": {"executor": "local", "slot": slot.index, "device": slot.device},
                "wall_s": round(time.monotonic() - slot.started, 2) if slot.started else 0.0}

    def close(self) -> None:
        for slot in self.slots:
            slot.close()
        self.slots = []
