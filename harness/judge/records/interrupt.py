"""Stopping a judge on SIGINT or SIGTERM without losing work or leaving processes behind.

Why not Python's default: Ctrl-C raised KeyboardInterrupt wherever the judge happened to be (inside the protocol's
`select`, say), printed a traceback, wrote no leaderboard and said nothing about resuming, and SIGTERM (a CI cancel,
`timeout`) killed the judge outright. The workers sit in sessions of their own, so neither signal reaches them:
the judge has to stop them itself.

So the CLI installs `handle()`: the first signal stops every process the judge started (workers, whatever they
forked, those that escaped their session and were re-parented to the judge, a child subreaper) and raises
`Interrupted` where the judge is; the command catches it, keeps what was judged and says how to resume. A second
signal while that runs ends the process at once, after the same sweep, so a shutdown that hangs can always be cut
short and still leaves no process behind. The exit status is 128 + the signal's number, as a shell reports a
process killed by it (130 for SIGINT, 143 for SIGTERM).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from ..process.watchdog import tree

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state: dict = {"signum": None, "last_words": None}


class Interrupted(KeyboardInterrupt):
    """Raised where the judge was when the first signal came. A KeyboardInterrupt, so that everything that already
    gives Ctrl-C its due (Hypothesis, `except Exception` blocks that must not swallow it) treats it alike."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def status(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def handle(last_words=None):
    """Within the block, SIGINT and SIGTERM stop the judge as above. `last_words()`, if given, runs before a second
    signal ends the process (the `--json` object, which must be printed exactly once). Restores the previous
    handlers on leaving, so a caller that runs the CLI in-process (a test) gets its own back."""
    if sys.platform == "win32" or not _main_thread():
        yield
        return
    # A signal ignored by whoever started us stays ignored (`nohup`, a shell's background job ignores SIGINT), as
    # Python itself leaves an ignored SIGINT alone.
    previous = {s: signal.getsignal(s) for s in SIGNALS if signal.getsignal(s) != signal.SIG_IGN}
    _state.update(signum=None, last_words=last_words)
    for s in previous:
        signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _state.update(signum=None, last_words=None)


@contextlib.contextmanager
def held():
    """Signals wait until the block is done: a line of output is written whole or not at all. A signal that came
    meanwhile is handled on leaving."""
    if not hasattr(signal, "pthread_sigmask") or not _main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _on_signal(signum, frame) -> None:
    if _state["signum"] is None:
        _state["signum"] = signum
        stop_descendants()
        raise Interrupted(signum)
    stop_descendants()
    print(f"gauntlet: {signal.Signals(signum).name} again while stopping: stopped at once", file=sys.stderr)
    words = _state["last_words"]
    if words is not None:
        with contextlib.suppress(Exception):
            words()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(128 + signum)


def stop_descendants(rounds: int = 200) -> bool:
    """SIGKILL every live descendant of this process until none is left; True if none is. Rounds, because a
    process that forks as it dies, or a grandchild re-parented to us when its parent dies, shows up only after
    the first kill. Zombies are left for whoever waits on them (subprocess.Popen for the workers)."""
    me = os.getpid()
    for _ in range(rounds):
        alive = [pid for pid in tree(me)[1:] if _alive(pid)]
        if not alive:
            return True
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
    return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in "ZXx"


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()
