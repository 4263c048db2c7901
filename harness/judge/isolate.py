"""Run a candidate in its own spawned process, with a wall-clock limit on every request.

The child gets a fresh temporary working directory (and HOME/TMPDIR inside it), its own process group (so a
timeout kills whatever it forked), and two private pipes; its stdout and stderr go to a log file whose tail is
quoted when it dies. A crash, a hang, an illegal memory access or a sticky CUDA error becomes a Reason here and the
run goes on: the parent's own CUDA context is never touched by the child's faults.
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

from harness import discover, protocol
from harness.judge import bytecode
from harness.judge.sandbox import Confinement
from harness.judge.sandbox.limits import Limits
from harness.judge.watchdog import Bounds, TimeBudget, Watchdog, children, children_listed, tree
from harness.reasons import CODES, Reason

START_TIMEOUT_S = 300.0      # importing torch + compiling a kernel on first use can take a while
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int) -> None:
    """Linux's prctl; a no-op elsewhere."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _become_subreaper() -> None:
    """Processes the candidate double-forks (fork + setsid, escaping its process group) are re-parented to us
    instead of init, so we can see and kill them."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _stat(pid: int):
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
    for pid in _children(me):
        st = _stat(pid)
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


def _children(me: int) -> list[int]:
    """Our children, from our threads' /proc children lists (watchdog.children: microseconds); where the kernel has
    no such list, every process in /proc (milliseconds, on every stop and continue of a worker: seconds per
    judgement), which adopted_orphans narrows down by parent."""
    if children_listed():
        return children(me)
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


MAX_FILE_BYTES = 1 << 30     # a candidate printing without end would otherwise fill the disk with its log
DEFAULT_SANDBOX = "auto"     # the mode a Child gets unless told; the CLI and the plugin pass the user's choice
# Every worker of this judge that is alive: none of them counts as another worker's escaped process.
_LIVE: set[int] = set()


class ChildFailed(Exception):
    """The child can no longer be used; `reason` says why (crash, timeout, import_error, ...)."""

    def __init__(self, reason: Reason):
        super().__init__(reason.detail)
        self.reason = reason


def _worker_env(home: str) -> dict:
    """The child's environment: the candidate's own temp dir as HOME, TMPDIR and Triton's cache (the only place it
    may write), no user site-packages and none of the interpreter's PYTHON* switches but the path (PYTHONSTARTUP,
    PYTHONINSPECT, PYTHONHOME would run or find other code), and an import path on which `harness` is this very
    package. From a checkout that takes the checkout on PYTHONPATH; an installed package is
    already on the interpreter's path, and site-packages is not put in front of the standard library."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") or k == "PYTHONPATH"}
    env.update(HOME=home, TMPDIR=home, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONNOUSERSITE="1", TRITON_CACHE_DIR=os.path.join(home, ".triton"))
    env.pop("TRITON_INTERPRET", None)         # the worker decides, per backend and device
    return bytecode.worker_env(import_path(env))


def import_path(env: dict) -> dict:
    """`env` with an import path on which `harness` is this very package (a checkout's folder in front; an
    installed package is on the interpreter's own path already)."""
    if not _on_site_path(discover.ROOT):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(discover.ROOT), os.environ.get("PYTHONPATH", "")]))
    return env


def _on_site_path(folder: Path) -> bool:
    import site
    sites = site.getsitepackages() + [site.getusersitepackages()]
    return any(Path(s).resolve() == folder for s in sites if s)


def close_all(children: list) -> None:
    """Close workers together: each is asked to exit first, then all are waited for (up to 5 s in all), so their
    teardowns (a CUDA context's takes about a second) overlap instead of adding up. Unwinding from Ctrl-C (or the
    CLI's Interrupted): no polite exit, which a worker busy in solve() would answer only after the wait; its whole
    tree is killed now, escaped processes included."""
    stopping = isinstance(sys.exc_info()[1], KeyboardInterrupt)
    asked = [(child, child._ask_exit(stopping)) for child in children if child is not None]
    deadline = time.monotonic() + 5.0
    for child, waited in asked:
        child._finish_close(waited, stopping, deadline)


class Child:
    """`problem`: the Problem the parent loaded (an id is looked up on the search path in force, here, in the
    parent). The worker is handed the problem's folder and its baselines' files, not names to resolve again."""

    def __init__(self, problem, path: Path | None, backend: str, device: str, role: str = "candidate",
                 sandbox: str | None = None, budget: TimeBudget | None = None, bounds: Bounds | None = None,
                 deferred: bool = False, fmt: str = "native"):
        """`deferred`: start the process and return at once; `finish_start()` completes the start. A deferred
        worker does the harness's own start-up (imports, the problem) and then waits for the judge's word before
        it touches the GPU (or, a candidate's, imports the candidate), so the judge can let the two workers' starts
        overlap, keep every line of candidate code after the baseline's quiet-GPU measurement, and run each
        worker's GPU start-up inside a turn on the card (harness.judge.turns), never beside another judge's
        timing.
        `fmt`: the candidate file's format (harness.formats); the worker wraps a KernelBench or GPU MODE file into
        `solve` (harness.child.adapters) and judges it like any other."""
        self.role, self.backend, self.device = role, backend, device
        self.budget = budget if budget is not None else TimeBudget(None)
        if isinstance(problem, str):
            problem = discover.get_problem(problem)
        baselines = discover.baseline_files(problem) if role == "baseline" else {}
        self.tmp = tempfile.TemporaryDirectory(prefix="gauntlet-")
        self.log_path = Path(self.tmp.name) / "child.log"
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        protocol.widen_pipe(self.resp_r)      # outputs of GBs come back this way
        env = _worker_env(self.tmp.name)
        _become_subreaper()
        self.sandbox = Confinement(sandbox or DEFAULT_SANDBOX, self.tmp.name,
                                   Limits(file_bytes=MAX_FILE_BYTES))
        self.alive = False
        # -P (3.11+): the worker's folder, which it may write, is not put ahead of the installed packages.
        flags = ["-P"] if sys.version_info >= (3, 11) else []
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, *flags, "-m", "harness.child.worker", str(req_r), str(resp_w), role,
                     str(Path(problem.root).resolve()), str(path or "-"), backend, device,
                     json.dumps({label: str(Path(f).resolve()) for label, f in baselines.items()}),
                     "gated" if deferred else "open", fmt or "native"],
                    cwd=self.tmp.name, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    pass_fds=(req_r, resp_w), start_new_session=True, preexec_fn=self.sandbox.preexec)
        except subprocess.SubprocessError as exc:     # the confinement could not be put in force: never run open
            for fd in (req_r, resp_w, self.req_w, self.resp_r):
                os.close(fd)
            self.sandbox.close()
            self.tmp.cleanup()
            raise RuntimeError(f"the {role} worker could not be confined ({exc}); "
                               f"{self.log_tail_of(self.log_path)}") from None
        finally:
            self.sandbox.close()          # the child holds its own copy of the ruleset, in force
        os.close(req_r)
        os.close(resp_w)
        _LIVE.add(self.proc.pid)
        st = _stat(self.proc.pid)
        self.started = st[4] if st else 0
        self.alive = True
        self.stopped = False
        self.watchdog = Watchdog(self.proc.pid, self.tmp.name, bounds or Bounds(), self._escaped_cheap)
        self.gated, self.hello, self.start_failure = deferred, None, None
        if not deferred:
            self.finish_start()

    def release(self) -> None:
        """Let a gated worker go on to the GPU (and, a candidate's, to its import) without waiting for it: the
        caller holds the turn its GPU start-up runs in (harness.judge.turns) until finish_start returns."""
        if self.gated:
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
        header, _ = self._recv(min(START_TIMEOUT_S, self.budget.left()), "starting and importing the solution",
                               max_blob=0)
        self.confinement = self._confinement(header)
        if not header.get("ok"):
            self.close()
            code = header.get("code", "crash")
            raise ChildFailed(Reason(code if code in CODES else "tampering", str(header.get("detail", ""))))
        return header

    def request(self, header: dict, timeout: float, what: str, max_blob: int = 0):
        """Send one request and wait for the reply. `max_blob`: the most bytes any blob of the reply may hold (the
        expected output's size); a larger one is `tampering`, read no further."""
        if not self.alive:
            raise ChildFailed(Reason("crash", "the candidate's process is no longer running"))
        if self.budget.left() <= 0:
            self.close()
            raise ChildFailed(Reason("timeout", f"the judgement's total time limit of {self.budget.limit_s:.0f} s "
                                                f"was used up before {what}"))
        self.cont()
        try:
            protocol.send(self.req_w, header)
        except (BrokenPipeError, OSError):
            raise ChildFailed(self._death_reason(what)) from None
        return self._recv(timeout, what, max_blob)

    # -- stopping: while the other side is timed, nothing of this one runs ------------------------------------
    def stop(self) -> None:
        """SIGSTOP the child's process group and every process that escaped it. Its queued GPU work is not stopped:
        the baseline worker's quiet check (harness.judge.bench) sees any that is left."""
        if self.alive and not self.stopped:
            for pid in self.escaped():
                _signal(pid, signal.SIGSTOP)
            _signal_group(self.proc.pid, signal.SIGSTOP)
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
                _signal(pid, signal.SIGSTOP)
            _signal_group(self.proc.pid, signal.SIGSTOP)
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:     # a SIGCONT sent before the stop lands would discard it
                st = _stat(self.proc.pid)
                if st is None or st[0] in "TtZX":
                    break
                time.sleep(0.0002)
        _signal_group(self.proc.pid, signal.SIGCONT)
        for pid in escaped:
            _signal(pid, signal.SIGCONT)
        self.stopped = False

    def _recv(self, timeout: float, what: str, max_blob: int = 0):
        left = self.budget.left()
        t0 = time.monotonic()
        try:
            return protocol.recv(self.resp_r, min(timeout, max(left, 0.0)), max_blob=max_blob)
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
        self.close()
        if self.watchdog.tripped:
            return Reason("crash", f"the {self.role}'s process was stopped by the judge: {self.watchdog.tripped}")
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

    def _ask_exit(self, stopping: bool) -> bool:
        """The first half of closing: let the worker run and ask it to exit. Whether it is to be waited for."""
        if not stopping:
            self.cont()
        self.watchdog.stop()
        if not self.alive:
            return False
        self.alive = False
        try:
            if not stopping:
                protocol.send(self.req_w, {"op": "exit"})
        except OSError:
            pass
        return True

    def _finish_close(self, waited: bool, stopping: bool, deadline: float) -> None:
        if waited:
            try:
                self.proc.wait(timeout=0 if stopping else max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        if stopping:
            self._kill_tree()
        self._kill_group()
        for fd in (self.req_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.req_w = self.resp_r = -1
        _LIVE.discard(self.proc.pid)
        self.tmp.cleanup()

    def _escaped_cheap(self) -> list[int]:
        """For the watchdog's frequent looks: the judge's own children (where escapes are re-parented), not a scan
        of /proc; other live workers of this judge are not this one's escapes."""
        mine = os.getsid(0)
        out = []
        for pid in children(os.getpid()):
            st = _stat(pid)
            if pid not in _LIVE and st and st[3] != mine and st[4] >= self.started:
                out.append(pid)
        return out

    def _confinement(self, hello: dict) -> dict:
        """What was in force, as the judge set it and as it reads it from outside (/proc/PID/status) and the worker
        found it before any candidate code ran (a write beside its scratch dir refused)."""
        out = self.sandbox.describe()
        status = {}
        try:
            with open(f"/proc/{self.proc.pid}/status") as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    status[key] = value.strip()
        except OSError:
            pass
        seen = {"no_new_privs": status.get("NoNewPrivs") == "1", "seccomp_filter": status.get("Seccomp") == "2",
                "no_capabilities": status.get("CapEff", "").strip("0") == "",
                "writes_refused": bool((hello.get("confined") or {}).get("writes_refused"))}
        want = {"no_new_privs": self.sandbox.mode != "off", "seccomp_filter": bool(self.sandbox.filter),
                "no_capabilities": self.sandbox.mode != "off", "writes_refused": bool(self.sandbox.ruleset)}
        out["verified"] = all(seen[k] for k, v in want.items() if v) and bool(status)
        out["watchdog"] = self.watchdog.bounds.as_record()
        if self.sandbox.mode == "require" and not out["verified"]:
            self.close()
            raise RuntimeError(f"--sandbox require: the {self.role} worker is not confined as set: "
                               f"{ {k: seen[k] for k, v in want.items() if v} }")
        return out

    def escaped(self) -> list[int]:
        """Processes that left the child's process group and session and are still running. The judge's other
        live workers are not this one's escapes, nor are their zombies reaped here: their own Popen must see how
        they died (reaped here, a baseline worker killed by SIGKILL read as "exited with status 0")."""
        return adopted_orphans({self.proc.pid} | _LIVE, self.started)

    def _kill_tree(self) -> None:
        """SIGKILL the worker and every descendant at once (a process that left the group is still a descendant
        while the worker lives), until none is alive."""
        for _ in range(100):
            pids = [p for p in tree(self.proc.pid, self.escaped()) if (_stat(p) or "Z")[0] not in "ZXx"]
            if not pids:
                return
            for pid in pids:
                _signal(pid, signal.SIGKILL)
            time.sleep(0.005)

    def _kill_group(self) -> None:
        for pid in self.escaped():
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _signal(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(pgid: int, sig) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
