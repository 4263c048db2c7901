"""The judge's watch on a worker's resources, from outside its process: host memory, GPU memory, processes, threads
and the scratch disk of the worker and everything it started (its descendants, and those that escaped its session
and were re-parented to the judge, a child subreaper), plus the total time a judgement may hold a judge.

GPU memory: where several judges share a card (GAUNTLET_JUDGES_PER_GPU: pytest -n on a GPU runner, --overlap), a
worker that takes the whole card makes the other judges' honest candidates run out of memory (a hoarding fixture's
worker under pytest -n can take most of a card, and other tests' honest candidates then fail). The
driver's own accounting (NVML, per process; the candidate cannot write it) is read every poll, summed over the
worker's tree, and the tree is killed past its share of the card (gpu_bound: the card's memory over the judges
sharing it, or what timing the problem needs if that is more, plus room for a context). Where NVML is missing or
cannot say (no driver, no per-process figure) there is no GPU bound, and the record says so (`gpu_gib`: null). Known
gap: a runner whose NVML reports process ids of another PID namespace than the judge's gives figures that match no
worker, so the bound never trips there.

Why outside: an rlimit on address space breaks CUDA (it reserves far more virtual memory than it uses), and a
cgroup v2 group is not delegated on every runner (the CI machine has cgroup v1). A thread in the judge reads
/proc every POLL_S and kills the worker's whole tree when a bound is passed; the worker's reply then becomes a
clear reason (`crash` naming the limit) instead of a dead judge (the OOM killer choosing the judge) or a full disk.
Forks faster than one poll are bounded by RLIMIT_NPROC (gauntlet.judge.sandbox.limits) as a backstop.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from dataclasses import dataclass

from ...cards import CardMemory, judges_per_gpu
from ...reasons import Reason
from ..sandbox.usage import held, pss, rss_threads, scratch_usage

POLL_S = 0.1
FAILED_LOOKS = 10          # looks failing in a row (a second at POLL_S) before the worker is stopped, unwatched
DISK_EVERY_S = 1.0
GIB = 1 << 30


def _mem_total() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 16 * GIB


def _judges() -> int:
    """GAUNTLET_JUDGES_PER_GPU (gauntlet.cards' parser), 1 where it is malformed: a usage error said before any
    judging (gauntlet.cli.options), not the watchdog's to raise."""
    try:
        return judges_per_gpu()
    except ValueError:
        return 1


@dataclass
class Bounds:
    """Per worker. `ram_bytes`: resident memory of its whole tree (default: half the host's memory shared by the
    judges on this GPU, at least 4 GiB; GAUNTLET_WORKER_RAM_GIB overrides, read by the judge); `processes` alive at
    once besides the worker (Triton starts ptxas, a compile pool a few more); `threads` over the tree; `disk_bytes`
    in its scratch dir (GAUNTLET_WORKER_DISK_GIB overrides)."""
    ram_bytes: int = 0
    gpu_bytes: int = 0            # set where the card's accounting can be read (worker_bounds); 0: no GPU bound
    processes: int = 64
    threads: int = 2048
    disk_bytes: int = 8 * GIB
    disk_entries: int = 200_000

    def __post_init__(self):
        disk = os.environ.get("GAUNTLET_WORKER_DISK_GIB")
        if disk:
            self.disk_bytes = int(float(disk) * GIB)
        if not self.ram_bytes:
            raw = os.environ.get("GAUNTLET_WORKER_RAM_GIB")
            if raw:
                self.ram_bytes = int(float(raw) * GIB)
            else:
                self.ram_bytes = max(4 * GIB, _mem_total() // (2 * _judges()))

    def as_record(self) -> dict:
        return {"ram_gib": round(self.ram_bytes / GIB, 1),
                "gpu_gib": round(self.gpu_bytes / GIB, 1) if self.gpu_bytes else None,
                "processes": self.processes, "threads": self.threads, "disk_gib": round(self.disk_bytes / GIB, 1)}


class TimeBudget:
    """The total time one judgement's candidate workers may take answering (start-up, every call, timing), across
    the fresh workers a crash costs. A candidate that sleeps just under the per-call limit on every call would
    otherwise hold a judge for hours and pass."""

    def __init__(self, limit_s: float | None):
        self.limit_s, self.used_s = limit_s, 0.0

    def left(self) -> float:
        return float("inf") if self.limit_s is None else self.limit_s - self.used_s


def children(pid: int) -> list[int]:
    """The children of `pid`, from each of its threads' /proc children list (a subreaper's adopted orphans are
    listed under one of its threads); [] where the kernel keeps no such list (`children_listed`)."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(p) for p in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


def children_listed() -> bool:
    """Whether this kernel keeps /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)."""
    return os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def tree(root: int, extra: list[int] = ()) -> list[int]:
    """`root`, its descendants, and `extra` (escaped ones) with theirs."""
    seen, todo = [], [root, *extra]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo += children(pid)
    return seen


TIMING_SETS, TIMING_OUTPUTS = 4, 7     # gauntlet.child.timing.Bench: 3 input sets and a refill's; a batch's outputs
# What building the sets and making the calls leave in the worker's allocator besides (fp32 headline shapes):
# input-sized, each set's original before it is copied into its guard bands and the input generator's temporaries
# (attn_output's softmax over masked logits: its worker holds about twice its sets and outputs); output-sized, the
# call's own temporaries (attn_scores' product before its scaling: half as much again as its sets and outputs)
# (docs/benchmarks.md).
TIMING_GENERATION, TIMING_WORKSPACE = 4, 3
CONTEXT_SLACK = 2 * GIB               # the worker's CUDA context, cuBLAS and Triton workspaces, allocator rounding


def timing_need(problem) -> int:
    """Bytes a worker's timing of the problem's largest benchmark shape holds (its input sets and a batch's outputs,
    and what making them leaves cached: TIMING_GENERATION, TIMING_WORKSPACE; at 4 bytes an element, no shipped dtype
    is wider): timing runs with the card to one judge, and may need more than a correctness share."""
    widest, need = 4, 0.0
    for bench in problem.benchmark:
        shape = {k: v for k, v in bench.items() if k != "source"}
        try:
            need = max(need, (TIMING_SETS + TIMING_GENERATION) * problem.bytes(shape, widest, 0)
                       + (TIMING_OUTPUTS + TIMING_WORKSPACE) * problem.bytes(shape, 0, widest))
        except Exception:  # noqa: BLE001 - a formula that cannot be evaluated gives no figure; the share stands
            continue
    return int(need)


def gpu_bound(gpu: CardMemory, problem, judges: int) -> int:
    """A worker's GPU memory bound: its share of the card, or what timing the problem needs if that is more, plus
    room for its context. Honest workers stay under it (their cases are sized to 80% of the share:
    gauntlet.judge.values.memory); a worker that takes the card from the judges beside it does not.
    GAUNTLET_WORKER_GPU_GIB, read by the judge, sets the bound itself."""
    raw = os.environ.get("GAUNTLET_WORKER_GPU_GIB")
    if raw:
        return int(float(raw) * GIB)
    return max(gpu.share_bytes(judges), timing_need(problem)) + CONTEXT_SLACK


def worker_bounds(bounds: Bounds | None, problem, device: str) -> tuple[Bounds, CardMemory | None]:
    """A worker's bounds (a copy), with its GPU memory bound where the card's per-process accounting can be read."""
    bounds = dataclasses.replace(bounds) if bounds is not None else Bounds()
    if device != "cuda":
        return bounds, None
    card = CardMemory.current()
    if card is not None and not bounds.gpu_bytes:
        bounds.gpu_bytes = gpu_bound(card, problem, _judges())
    return bounds, card


def _file_key(fd: int | None) -> set:
    """{(device, inode)} of the file open as `fd`, or an empty set."""
    try:
        st = os.fstat(fd) if fd is not None else None
    except OSError:
        st = None
    return {(st.st_dev, st.st_ino)} if st is not None else set()


class Watchdog:
    """Started once a worker runs; `tripped` holds the first bound passed (then the tree has been killed)."""

    def __init__(self, pid: int, scratch: str, bounds: Bounds, escaped, gpu: CardMemory | None = None,
                 area_fd: int | None = None, channel=None):
        """`area_fd`: the worker's shared blob area (gauntlet.protocol.Area), whose written pages count as the
        worker's host memory (`area_bytes`). `channel()`: how the worker's end of the judge's channel was tampered
        with, or None (gauntlet.judge.sandbox.channel), checked at every look: a relay that swaps the reply
        descriptor is caught whenever a look lands while it is swapped."""
        self.pid, self.scratch, self.bounds, self.escaped, self.gpu = pid, scratch, bounds, escaped, gpu
        self.area_fd = area_fd
        self.area_file = _file_key(area_fd)    # counted by area_bytes, so not again by held()
        self.held = (0, 0)          # (memfd bytes, unlinked-file bytes) held open, refreshed at the disk pace
        self.tripped: str | None = None
        self.code = "crash"         # "tampering" where the trip was the channel's
        self.channel = channel
        self.peak = {"ram_gib": 0.0, "gpu_gib": 0.0, "processes": 0, "threads": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gauntlet-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        next_disk, failed = 0.0, 0
        while not self._stop.wait(POLL_S):
            try:
                why = self.look(disk=time.monotonic() >= next_disk)
                failed = 0
            except Exception as exc:  # noqa: BLE001 - the watch must never take the judge down
                # Nor fail open: a look that keeps failing leaves the worker with no bound at all (a bug of this
                # file did, unseen, until a test's fixture ballooned past it). A second of failures stops it.
                failed += 1
                if failed < FAILED_LOOKS:
                    continue
                why = f"the judge could not watch its resources (a harness error, not the candidate's): {exc!r}"
            if time.monotonic() >= next_disk:
                next_disk = time.monotonic() + DISK_EVERY_S
            if why:
                self.tripped = why
                self.kill()
                return

    def stopped(self, role: str) -> Reason | None:
        """Why the judge stopped the worker, or None."""
        if not self.tripped:
            return None
        return Reason(self.code, f"the {role}'s process was stopped by the judge: {self.tripped}")

    def look(self, disk: bool = True) -> str | None:
        tampered = self.channel() if self.channel is not None else None
        if tampered:
            self.code = "tampering"
            return tampered
        pids = tree(self.pid, self.escaped())
        rss = threads = 0
        rss_of = {}
        for pid in pids:
            r, t = rss_threads(pid)
            rss, threads, rss_of[pid] = rss + r, threads + t, r
        if disk:
            try:
                self.held = held(pids, self.area_file)
            except PermissionError:
                return "host memory limit: the worker's open files could not be read (it hid them from the judge)"
        self.peak["ram_gib"] = max(self.peak["ram_gib"], round(rss / GIB, 2))
        self.peak["processes"] = max(self.peak["processes"], len(pids) - 1)
        self.peak["threads"] = max(self.peak["threads"], threads)
        b = self.bounds
        if len(pids) - 1 > b.processes:
            return f"process limit: {len(pids) - 1} processes alive beside the worker (limit {b.processes})"
        if threads > b.threads:
            return f"thread limit: {threads} threads in the worker's processes (limit {b.threads})"
        if self.gpu is not None and b.gpu_bytes:
            on_card = self.gpu.used_by() or {}
            used = sum(on_card.get(pid, 0) for pid in pids)
            self.peak["gpu_gib"] = max(self.peak["gpu_gib"], round(used / GIB, 2))
            if used > b.gpu_bytes:
                return (f"GPU memory limit: the worker's processes held {used / GIB:.1f} GiB of the card "
                        f"(limit {b.gpu_bytes / GIB:.1f} GiB: its share of a card shared by the judges on it)")
        area = self.area_bytes() + self.held[0]
        if rss + area > b.ram_bytes:
            # Resident sets count the pages forked processes share once per process: only the proportional sum
            # (PSS, dearer to read) decides, plus the area's pages (which PSS halves where the judge has read
            # them, and misses where the worker has unmapped them): counted in full, an over-count of at most
            # half the area, where a worker could otherwise keep up to its size unseen. Memfds held open count in
            # full too (gauntlet.judge.sandbox.usage), mapped or not.
            total = sum(pss(pid, rss_of[pid]) for pid in pids) + area
            if total > b.ram_bytes:
                return (f"host memory limit: the worker's processes held {total / GIB:.1f} GiB "
                        f"(limit {b.ram_bytes / GIB:.1f} GiB)")
        if disk:
            used, entries = scratch_usage(self.scratch, b.disk_entries)
            used += self.held[1]
            if used > b.disk_bytes or entries > b.disk_entries:
                return (f"disk limit: {used / GIB:.1f} GiB in its scratch dir ({entries} entries) and the unlinked "
                        f"files it holds open (limit {b.disk_bytes / GIB:.1f} GiB, {b.disk_entries} entries)")
        return None

    def area_bytes(self) -> int:
        """The bytes of the worker's shared blob area that are in memory (written, not punched out)."""
        if self.area_fd is None:
            return 0
        try:
            return os.fstat(self.area_fd).st_blocks * 512
        except OSError:
            return 0

    def kill(self) -> None:
        for pid in tree(self.pid, self.escaped()):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
