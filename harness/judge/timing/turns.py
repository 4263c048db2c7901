"""Turns on one GPU for every judge that shares it: timing alone, correctness side by side.

Several judges may share a card: `pytest -n 8` on a one-GPU runner, `eval-many --overlap K` (K judge slots per GPU), two
`gauntlet run`s started by hand. Correctness does not need the card to itself; a timed figure does: a kernel of another
judge's candidate running beside a timed call slows it, and the quiet check (gauntlet.judge.timing.bench) would then
rule `background_work` against a candidate that did nothing. So every judge on the machine takes turns through two lock
files per physical card (its UUID), in the judge's cache folder (gauntlet.judge.process.cache):

- `sharing()`: a correctness call (the judge's inputs and oracle, the candidate's call, the comparison) and a
  candidate worker's start (its import may run GPU code). Many judges hold it at once.
- `alone()`: timing one shape, measuring the ceilings, a baseline worker's first quiet-GPU reading. One judge, and
  no correctness call of any other judge, holds the card.

`share_now()` turns a judge's turn alone into a shared one without letting go of the card (a timed shape's spot
checks, once its rounds are over: gauntlet.judge.timing.spots): other judges' correctness calls start again, and no
other judge's turn alone starts before it ends.

`alone()` is preferred: a judge waiting for it takes the gate first, so no new `sharing()` starts while it waits
for those in flight to end (flock alone would let a stream of overlapping shared holders starve it), except that
while one of them runs long, the gate opens briefly every half second for its first 30 s (Turns._drain). Both are
re-entrant within a process (a ceiling re-measured inside a timed shape takes no second lock).

These are flock(2) locks: the kernel drops them when their holder dies, so a killed judge never wedges the card.
A process that holds one and never lets go (a candidate that opened the file; the worker can read it) can only
delay: the wait is bounded (GAUNTLET_TURN_WAIT_S, default 1800 s), and then the judge fails with a harness error
that names the holders (from /proc/locks), never a verdict on its own candidate.

The host has a pair of its own (key `host`), taken after the card's: `sharing()` and `alone()` share it, so the
host's cards are timed and checked side by side; `host_alone()` (a shape timed again because the busy host starved
its calls: gauntlet.judge.timing.timed) holds it alone, so no correctness call or timing of any judge on any card runs
meanwhile. Cards first, then the host, always: no judge holds the host's lock while it waits for a card's.

`others()`: how many other live judges have used this card (`host_others()`: any card of this host); the quiet check's
`background_work` is the timed candidate's only where that is 0 (gauntlet.judge.timing.timed re-times, then records no
figure, when it is not).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from pathlib import Path

from ..process import cache

FOLDER = "gpu-turns"
WAIT_S = 1800.0
POLL_S = 0.005
# A turn alone's wait for the calls in flight: the gate let go for STEP_OPEN_S every STEP_EVERY_S, within STEP_FOR_S
# (Turns._drain). The open spell outlasts a waiter's longest pause between polls (cache.flock_within: 50 ms).
STEP_EVERY_S, STEP_OPEN_S, STEP_FOR_S = 0.5, 0.07, 30.0


class TurnTimeout(RuntimeError):
    """The card's lock was not free within GAUNTLET_TURN_WAIT_S: a harness/machine failure, not the candidate's."""


def wait_limit() -> float:
    raw = os.environ.get("GAUNTLET_TURN_WAIT_S")
    try:
        value = float(raw) if raw else WAIT_S
    except ValueError:
        value = WAIT_S
    return value if value > 0 else WAIT_S


class Turns:
    """The two locks of one card, opened once per process."""

    def __init__(self, key: str, folder: Path | None = None):
        self.key = key
        self.folder = Path(folder) if folder else cache.cache_root() / FOLDER
        self._lock = threading.RLock()      # this process's threads take turns among themselves first
        self._depth = 0
        self._mode = ""
        self._files: dict[str, int] = {}
        self._member: Path | None = None

    # -- the two kinds of turn --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def sharing(self):
        with self._turn("shared"):
            yield

    @contextlib.contextmanager
    def alone(self):
        with self._turn("alone"):
            yield

    @contextlib.contextmanager
    def _turn(self, mode: str):
        with self._lock:
            if self._depth:                 # held already by this process: nested turns are free
                if mode == "alone" and self._mode == "shared":
                    raise RuntimeError("harness bug: alone() asked for inside sharing() (would deadlock)")
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            fds = self._open()
            if fds is None:                 # no lock files (the cache folder cannot be written): one judge assumed
                yield
                return
            gate, gpu = fds
            self._take(gate, fcntl.LOCK_EX, "the gate")
            try:
                if mode == "alone":
                    self._drain(gate, gpu)
                else:
                    self._take(gpu, fcntl.LOCK_SH, "the card")
            except BaseException:
                fcntl.flock(gate, fcntl.LOCK_UN)
                raise
            if mode == "shared":
                fcntl.flock(gate, fcntl.LOCK_UN)     # let the next judge in; an alone() waiter keeps it
            self._depth, self._mode = 1, mode
            try:
                yield
            finally:
                self._depth, self._mode = 0, ""
                fcntl.flock(gpu, fcntl.LOCK_UN)
                if mode == "alone":
                    fcntl.flock(gate, fcntl.LOCK_UN)

    def share_from_alone(self) -> None:
        """Turn this process's turn alone into a shared one without letting go of the card: other judges'
        correctness calls start again at once, while no judge's turn alone can start before this one ends. The lock
        is converted while this process still holds the gate (flock's conversion is not atomic, but no other judge
        can reach the card's lock without the gate), then the gate is let go. A no-op unless this process holds a
        turn alone, unnested (gauntlet.judge.timing.timed: a timed shape's spots are fetched this way)."""
        with self._lock:
            if self._depth != 1 or self._mode != "alone" or "gpu" not in self._files:
                return
            fcntl.flock(self._files["gpu"], fcntl.LOCK_SH)
            self._mode = "shared"
            fcntl.flock(self._files["gate"], fcntl.LOCK_UN)

    def _drain(self, gate: int, gpu: int) -> None:
        """The card alone, the gate held: wait for the shared turns in flight to end. Where one runs long (a
        candidate compiling on a cold cache: seconds of CPU, the card idle), the judges whose short calls ended
        meanwhile would wait at the gate too. So every STEP_EVERY_S, for the first STEP_FOR_S of the wait, the gate is
        let go for STEP_OPEN_S (longer than a waiter's poll): each waiting judge starts one more call, then the gate is
        taken again. A later wait holds it throughout, as before: a stream of short calls cannot starve this one.
        The whole wait, steps included, is bounded by GAUNTLET_TURN_WAIT_S, as any turn's."""
        began = time.monotonic()

        def left() -> float:
            return max(0.0, wait_limit() - (time.monotonic() - began))
        while not cache.flock_within(gpu, fcntl.LOCK_EX, STEP_EVERY_S, POLL_S):
            if time.monotonic() - began > STEP_FOR_S or not left():
                self._take(gpu, fcntl.LOCK_EX, "the card", left())
                return
            fcntl.flock(gate, fcntl.LOCK_UN)
            time.sleep(STEP_OPEN_S)
            self._take(gate, fcntl.LOCK_EX, "the gate", left())

    def _take(self, fd: int, how: int, what: str, within: float | None = None) -> None:
        """Poll for the lock (a blocking flock could not be bounded in time without a signal), for at most
        GAUNTLET_TURN_WAIT_S, or `within` seconds: what is left of it (Turns._drain)."""
        limit = wait_limit()
        if not cache.flock_within(fd, how, limit if within is None else within, POLL_S):
            raise TurnTimeout(f"harness error: {what}'s turn lock of GPU {self.key} was not free after {limit:.0f} s "
                              f"(GAUNTLET_TURN_WAIT_S); held by process(es) {cache.holders(fd) or 'unknown'}: not a "
                              "verdict on the candidate")

    def _open(self):
        if "gpu" in self._files:
            return self._files["gate"], self._files["gpu"]
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            for name in ("gate", "gpu"):
                self._files[name] = os.open(self.folder / f"{self.key}.{name}", os.O_RDWR | os.O_CREAT |
                                            os.O_CLOEXEC, 0o600)
        except OSError:
            self.close()
            return None
        self._join()
        return self._files["gate"], self._files["gpu"]

    # -- who else is judging on this card -----------------------------------------------------------------
    def _join(self) -> None:
        """Say this process judges on this card: a file named after it, removed at close (a dead one's is ignored
        and cleared by the next judge that counts)."""
        members = self.folder / f"{self.key}.members"
        try:
            members.mkdir(exist_ok=True, mode=0o700)
            me = members / f"{os.getpid()}-{_start_time(os.getpid())}"
            me.touch()
            self._member = me
        except OSError:
            self._member = None

    def others(self) -> int:
        """Other live judges that have taken a turn on this card (their process still running)."""
        members = self.folder / f"{self.key}.members"
        count = 0
        try:
            entries = list(members.iterdir())
        except OSError:
            return 0
        for entry in entries:
            pid, _, started = entry.name.partition("-")
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            if _start_time(int(pid)) == started:
                count += 1
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()
        return count

    def close(self) -> None:
        for fd in self._files.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._files = {}
        if self._member is not None:
            with contextlib.suppress(OSError):
                self._member.unlink()
            self._member = None


def _start_time(pid: int) -> str:
    """The process's start time (clock ticks after boot): with the pid, names one process, never a reused pid."""
    from ..process.pids import stat as _stat
    st = _stat(pid)
    return str(st[4]) if st else ""


_TURNS: dict[int, Turns | None] = {}     # CUDA device index -> its card's Turns: named once, not per call


def for_device(device: str = "cuda") -> Turns | None:
    """This process's Turns for its current CUDA card (None on the CPU, or where the card cannot be named)."""
    if device != "cuda":
        return None
    try:
        import torch
        index = torch.cuda.current_device()
        if index not in _TURNS:
            props = torch.cuda.get_device_properties(index)
            key = str(getattr(props, "uuid", "") or "") or f"pci-{props.pci_bus_id}-{props.pci_device_id}"
            _TURNS[index] = Turns("".join(c if c.isalnum() or c in "-_" else "_" for c in key))
    except (RuntimeError, AssertionError, AttributeError):
        return None
    return _TURNS[index]


def card(device: str) -> str | None:
    """The name of `device`'s card that its turns are keyed by (its UUID, else its PCI address); None on the CPU."""
    turns = for_device(device)
    return turns.key if turns is not None else None


HOST_KEY = "host"
_HOST: list = []                         # this process's Turns of the host's lock (one per process)


def _host() -> Turns:
    if not _HOST:
        _HOST.append(Turns(HOST_KEY))
    return _HOST[0]


@contextlib.contextmanager
def _with_host(card_turn, host_mode: str):
    """The card's turn, then the host's (always in that order, so no two judges ever wait on each other)."""
    with card_turn:
        host = _host()
        with host.alone() if host_mode == "alone" else host.sharing():
            yield


def sharing(device: str):
    """A shared turn on `device`'s card, and on the host (nothing to take on the CPU)."""
    turns = for_device(device)
    return _with_host(turns.sharing(), "shared") if turns is not None else contextlib.nullcontext()


def alone(device: str):
    """The card to this judge alone (nothing to take on the CPU). The host stays shared: judges on its other cards
    go on, their timing and their correctness calls alike."""
    turns = for_device(device)
    return _with_host(turns.alone(), "shared") if turns is not None else contextlib.nullcontext()


def host_alone(device: str):
    """The card and the whole host to this judge alone: no judge's correctness call or timing on any card of this
    host meanwhile (gauntlet.judge.timing.timed: a shape whose timed calls the host starved is timed again this way)."""
    turns = for_device(device)
    return _with_host(turns.alone(), "alone") if turns is not None else contextlib.nullcontext()


def share_now(device: str) -> None:
    """Inside alone() or host_alone(): the card and the host shared from now on until the turn ends, held throughout
    (Turns.share_from_alone; the host's first, so nothing ever waits on a lock this judge converts)."""
    turns = for_device(device)
    if turns is not None:
        _host().share_from_alone()
        turns.share_from_alone()


def others(device: str) -> int:
    """Other live judges that have taken a turn on `device`'s card."""
    turns = for_device(device)
    return turns.others() if turns is not None else 0


def host_others(device: str) -> int:
    """Other live judges that have taken a turn on any card of this host (sharing this judge's cache folder)."""
    return _host().others() if for_device(device) is not None else 0


def out_of_memory(reason) -> bool:
    """A crash that ran out of GPU memory: the judge's own (its message below) or the worker's (torch's error in
    its traceback). The worker's text is the candidate's to write, so this only ever earns a second try alone."""
    return reason.code == "crash" and any(s in reason.detail for s in (
        "OutOfMemoryError", "CUDA out of memory", "CUDA error: out of memory", "the judge ran out of GPU memory"))


def crowded_out(reason, device: str) -> bool:
    """Out of GPU memory while other judges are on the card: they may have pushed it out, so it earns one more try
    with the card alone (a correctness call, a worker's start, a timed shape's inputs)."""
    return device == "cuda" and out_of_memory(reason) and others(device) > 0
