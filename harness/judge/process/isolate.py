"""Run a candidate in its own spawned process, with a wall-clock limit on every request.

The child gets a fresh working directory (HOME/TMPDIR inside it), its own process group (a timeout kills what it
forked), two private pipes and a log whose tail is quoted when it dies. A crash, a hang, an illegal memory access or
a sticky CUDA error becomes a Reason and the run goes on: the child's faults never touch the parent's CUDA context.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ... import discover, protocol
from . import bytecode, cache, pids
from .pids import become_subreaper, close_all, signal_group, signal_pid, stat  # noqa: F401 - close_all: API
from .watchdog import Bounds, TimeBudget, Watchdog, worker_bounds
from ..sandbox import Confinement, outside, verify
from ..sandbox.limits import Limits
from ...reasons import CODES, Reason

START_TIMEOUT_S = 300.0      # importing torch + compiling a kernel on first use can take a while
MAX_FILE_BYTES = 1 << 30     # a candidate printing without end would otherwise fill the disk with its log
DEFAULT_SANDBOX = "auto"     # the mode a Child gets unless told; the CLI and the plugin pass the user's choice


class ChildFailed(Exception):
    """The child can no longer be used; `reason` says why (crash, timeout, import_error, ...)."""

    def __init__(self, reason: Reason):
        super().__init__(reason.detail)
        self.reason = reason


class Child:
    """`problem`: the Problem the parent loaded (an id is looked up on the search path in force, here, in the
    parent). The worker is handed the problem's folder and its baselines' files, not names to resolve again."""

    def __init__(self, problem, path: Path | None, backend: str, device: str, role: str = "candidate",
                 sandbox: str | None = None, budget: TimeBudget | None = None, bounds: Bounds | None = None,
                 deferred: bool = False, fmt: str = "native", watch: bool = True):
        """`deferred`: start the process and return at once; `finish_start()` completes the start. A deferred
        worker does the harness's own start-up (imports, the problem) and then waits for the judge's word before
        it touches the GPU (or, a candidate's, imports the candidate), so the judge can let the two workers' starts
        overlap, keep every line of candidate code after the baseline's quiet-GPU measurement, and run each
        worker's GPU start-up inside a turn on the card (gauntlet.judge.timing.turns), never beside another judge's
        timing.
        `fmt`: the candidate file's format (gauntlet.formats); the worker wraps a KernelBench or GPU MODE file into
        `solve` (gauntlet.child.adapters) and judges it like any other.
        `watch`: start the watchdog now; False (a gated worker only) leaves it to `watch()`, so that a caller can
        spawn two workers before it imports torch (the watchdog's GPU bound reads the card through torch)."""
        self.role, self.backend, self.device = role, backend, device
        self.budget = budget if budget is not None else TimeBudget(None)
        if isinstance(problem, str):
            problem = discover.get_problem(problem)
        baselines = discover.baseline_files(problem) if role == "baseline" else {}
        self.tmp = tempfile.TemporaryDirectory(prefix="gauntlet-")
        self.log_path = Path(self.tmp.name) / "child.log"
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        protocol.widen_pipe(self.resp_r)      # outputs of GBs come back this way, or (a MiB or more) through
        self.area = protocol.Area.create()    # a sealed shared-memory file of the worker's own (protocol.Area)
        env = bytecode.worker_start_env(self.tmp.name)
        become_subreaper()
        self.sandbox = Confinement(sandbox or DEFAULT_SANDBOX, self.tmp.name,
                                   Limits(file_bytes=MAX_FILE_BYTES))
        self.alive = False
        self.outside = self.sandbox.outside = outside.Outside((bounds or Bounds()).ram_bytes, role == "candidate")
        # What this very file compiled when it was last judged (cache.seed_compiled), only where Landlock keeps
        # every worker out of the judge's cache folder.
        self.compiled = (cache.compiled_key(path, fmt or "native")
                         if role == "candidate" and path is not None and self.sandbox.ruleset is not None else None)
        if self.compiled:
            cache.seed_compiled(self.compiled, self.tmp.name)
        # -P (3.11+): the worker's folder, which it may write, is not put ahead of the installed packages.
        flags = ["-P"] if sys.version_info >= (3, 11) else []
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, *flags, "-m", "gauntlet.child.worker", str(req_r), str(resp_w), role,
                     str(Path(problem.root).resolve()), str(path or "-"), backend, device,
                     json.dumps({label: str(Path(f).resolve()) for label, f in baselines.items()}),
                     "gated" if deferred else "open", fmt or "native",
                     str(self.area.fd) if self.area else "-"],
                    cwd=self.tmp.name, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    pass_fds=(req_r, resp_w, *([self.area.fd] if self.area else [])), start_new_session=True,
                    preexec_fn=self.sandbox.preexec)
        except subprocess.SubprocessError as exc:     # the confinement could not be put in force: never run open
            for fd in (req_r, resp_w, self.req_w, self.resp_r):
                os.close(fd)
            self.area and self.area.close()
            self.outside.group.remove()   # (the sandbox is closed below)
            self.tmp.cleanup()
            raise RuntimeError(f"the {role} worker could not be confined ({exc}); "
                               f"{self.log_tail_of(self.log_path)}") from None
        finally:
            self.sandbox.close()          # the child holds its own copy of the ruleset, in force
        self.outside.started(self.proc.pid, lambda: pids.tree(self.proc.pid, self._escaped_cheap()),
                             outside.handed_fds(req_r, self.req_w, self.resp_r, resp_w,
                                                self.area.fd if self.area else None))
        os.close(req_r)
        os.close(resp_w)
        pids.LIVE.add(self.proc.pid)
        st = stat(self.proc.pid)
        self.started = st[4] if st else 0
        self.alive = True
        self.stopped = False
        self.watchdog: Watchdog | None = None
        self._watch_args = (bounds, problem)
        self.gated, self.hello, self.start_failure = deferred, None, None
        if watch or not deferred:
            self.watch()
        if not deferred:
            self.finish_start()

    def watch(self) -> None:
        """Start the watchdog (gauntlet.judge.process.watchdog), bounding the worker's memory (its share of the card's
        where NVML reads it), processes, disk and time. Always before the worker is let go: a gated worker runs
        only the harness's own start-up (no candidate code, no GPU) until then."""
        if self.watchdog is None:
            bounds, card = worker_bounds(*self._watch_args, self.device)
            self.watchdog = Watchdog(self.proc.pid, self.tmp.name, bounds, self._escaped_cheap, gpu=card,
                                     area_fd=self.area.fd if self.area else None, channel=self.outside.look)

    def release(self) -> None:
        """Let a gated worker go on to the GPU (and, a candidate's, to its import) without waiting for it: the
        caller holds the turn its GPU start-up runs in (gauntlet.judge.timing.turns) until finish_start returns."""
        if self.gated:
            self.watch()
            self.gated = False
            try:
                protocol.send(self.req_w, {"op": "go"})
            except (BrokenPipeError, OSError):
                self.start_failure = self._death_reason("starting")

    def finish_start(self) -> None:
        """Let a gated worker go on (release) and wait for its hello. ChildFailed when it does not start, the same
        one on every later call (a baseline worker's failed start is said where timing needs it)."""
        if self.hello is not None:
            return
        self.release()
        if self.start_failure is None:
            try:
                self.hello = self._await_hello()
            except ChildFailed as exc:
                self.start_failure = exc.reason
        if self.start_failure is not None:
            raise ChildFailed(self.start_failure)

    def _await_hello(self) -> dict:
        # _recv bounds the wait by what is left of the total, and names the total when that is what ran out
        header, _ = self._recv(START_TIMEOUT_S, "starting and importing the solution", max_blob=0)
        header = self.outside.at_start(header, lambda: protocol.send(self.req_w, {"op": "import"}) or self._recv(
            START_TIMEOUT_S, "importing the solution", max_blob=0)[0])   # the tasks before the candidate's import
        self.confinement = verify.verify(self, header)
        if not header.get("ok"):
            self.close()
            code = header.get("code", "crash")
            raise ChildFailed(Reason(code if code in CODES else "tampering", str(header.get("detail", ""))))
        return header

    def request(self, header: dict, timeout: float, what: str, max_blob: int = 0, device: str | None = None,
                clock: dict | None = None):
        """Send one request and wait for the reply. `max_blob`: the most bytes any blob of the reply may hold (the
        expected output's size); a larger one is `tampering`, read no further. `device`: see protocol.recv.
        `clock` (a timed request) gets `sent` and `replied` (time.perf_counter) as the request is written and its
        reply read: the worker's time alone. The judge's own work around a request (continuing the worker, the
        /proc reads) varies with the host's load, and a timed request must not count it (docs/judging.md, "The
        outside clock"). Its `midway_s` bounds the moment of the check midway (Outside.midway)."""
        if not self.alive:
            raise ChildFailed(Reason("crash", "the candidate's process is no longer running"))
        if self.budget.left() <= 0:
            self.close()
            raise ChildFailed(Reason("timeout", f"the judgement's total time limit of {self.budget.limit_s:.0f} s "
                                                f"was used up before {what}"))
        self.cont()
        self.outside.before_request()
        try:
            protocol.send(self.req_w, header)
        except (BrokenPipeError, OSError):
            raise ChildFailed(self._death_reason(what)) from None
        clock = {} if clock is None else clock
        clock["sent"] = time.perf_counter()
        tampered = self.outside.midway(self.resp_r, clock.get("midway_s"))   # the channel (sandbox.channel)
        reply = None if tampered else self._recv(timeout, what, max_blob, device)
        clock["replied"] = time.perf_counter()
        if tampered or (tampered := self.outside.after_reply(header.get("op"), reply[0])):
            self.close()
            raise ChildFailed(Reason("tampering", f"while {what}: {tampered}"))
        return reply

    # -- stopping: while the other side is timed, nothing of this one runs ------------------------------------
    def stop(self) -> None:
        """SIGSTOP the child's process group and every process that escaped it. Its queued GPU work is not stopped:
        the baseline worker's quiet check (gauntlet.judge.timing.bench) sees any that is left."""
        if self.alive and not self.stopped:
            for pid in self.escaped():
                signal_pid(pid, signal.SIGSTOP)
            signal_group(self.proc.pid, signal.SIGSTOP)
            self.stopped = True

    def cont(self) -> None:
        """Let the child run. Every request goes through here (request()), and a child that is running is first
        stopped, and seen stopped, then continued: every request, a correctness call's as much as a timed batch
        after the other side's, reaches a process that was just stopped and continued, so a SIGCONT (a handler
        the candidate installs runs on it) says nothing about which phase the judgement is in."""
        if not self.alive:
            return
        escaped = self.escaped()
        if not self.stopped:
            for pid in escaped:
                signal_pid(pid, signal.SIGSTOP)
            signal_group(self.proc.pid, signal.SIGSTOP)
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:     # a SIGCONT sent before the stop lands would discard it
                st = stat(self.proc.pid)
                if st is None or st[0] in "TtZX":
                    break
                time.sleep(0.0002)
        signal_group(self.proc.pid, signal.SIGCONT)
        for pid in escaped:
            signal_pid(pid, signal.SIGCONT)
        self.stopped = False

    def _recv(self, timeout: float, what: str, max_blob: int = 0, device: str | None = None):
        left = self.budget.left()
        t0 = time.monotonic()
        try:
            return protocol.recv(self.resp_r, min(timeout, max(left, 0.0)), max_blob, self.area, device)
        except protocol.ChannelTimeout:
            self.close()
            if left < timeout:
                raise ChildFailed(Reason("timeout", f"the judgement's total time limit of {self.budget.limit_s:.0f} "
                                                    f"s ran out while {what}")) from None
            raise ChildFailed(Reason("timeout", f"no answer within {timeout:.0f} s while {what}")) from None
        except protocol.ChannelClosed:
            raise ChildFailed(self._death_reason(what)) from None
        except (ValueError, UnicodeDecodeError) as exc:
            self.close()
            raise ChildFailed(Reason("tampering", f"malformed message on the harness channel: {exc}")) from None
        finally:
            self.budget.used_s += time.monotonic() - t0

    def _death_reason(self, what: str) -> Reason:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        tail = self.log_tail()            # before close(), which removes the scratch dir and the log with it
        kernel = self.outside.stopped_by_kernel()     # before close() too, which removes the worker's memory group
        self.close()
        stopped = self.watchdog.stopped(self.role) if self.watchdog is not None else None
        if stopped or kernel:
            return stopped or Reason("crash", f"the {self.role}'s process was stopped by the kernel: {kernel}")
        if code is not None and code < 0:
            how = f"killed by {signal.Signals(-code).name}"
        elif code == 0:
            how = "exited with status 0 before answering (an early exit is not a pass)"
        else:
            how = f"exited with status {code}"
        return Reason("crash", f"the {self.role}'s process {how} while {what}; log tail:\n{tail}")

    def log_tail(self, n: int = 1500) -> str:
        return self.log_tail_of(self.log_path, n)

    @staticmethod
    def log_tail_of(log_path, n: int = 1500) -> str:
        try:
            with open(log_path, "rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - n))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        close_all([self])

    def _stop_watching(self) -> bool:
        """The first half of closing: the watchdog stopped; whether the worker was still to be closed."""
        if self.watchdog is not None:
            self.watchdog.stop()
        if not self.alive:
            return False
        self.alive = False
        return True

    def _finish_close(self) -> None:
        self._kill_tree()
        self._kill_group()
        for fd in (self.req_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.req_w = self.resp_r = -1
        self.area and self.area.close()
        self.outside.group.remove()
        pids.LIVE.discard(self.proc.pid)
        if self.compiled:                 # the worker's whole tree is dead: nothing writes its scratch any more
            cache.harvest_compiled(self.compiled, self.tmp.name)
        self.tmp.cleanup()

    def _escaped_cheap(self) -> list[int]:
        return pids.escaped_cheap(self.started)

    def escaped(self) -> list[int]:
        """Processes that left the child's process group and session and are still running (pids.escaped)."""
        return pids.escaped(self.proc.pid, self.started)

    def _kill_tree(self, once: bool = False) -> None:
        pids.kill_tree(self.proc.pid, self.escaped, once=once)

    def _kill_group(self) -> None:
        pids.kill_group(self.proc, self.escaped)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
