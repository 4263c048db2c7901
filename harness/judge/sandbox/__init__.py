"""OS confinement of every worker (candidate and baseline): what the kernel offers, the policy, and putting it in
force in the forked child before it executes the interpreter. Judge-side code: the candidate's process starts
already confined and never imports this package.

In force on a worker (`--sandbox auto`, the default, takes what the kernel offers; `require` refuses to judge
without all of it; `off` keeps only the resource bounds):
- Landlock (gauntlet.judge.sandbox.landlock): writes only beneath the worker's own scratch dir (its HOME and TMPDIR),
  its own /proc/PID, and the device nodes CUDA and the interpreter use (/dev/null, /dev/nvidia*, ...); no ptrace-class
  access to any process outside its domain (/proc/PID/mem, /proc/PID/fd of the judge or the other worker); no signals to
  them and no abstract UNIX sockets outside it (ABI 6); no TCP (ABI 4).
- seccomp (gauntlet.judge.sandbox.seccomp): no connection to any socket, no socket but UNIX ones, no io_uring, no
  namespaces or mounts, no other process's memory, no terminal injection, no System V IPC or POSIX message queues
  (objects that outlive the worker), no making itself undumpable (which would hide its /proc figures from the watchdog).
- capabilities dropped for good, no_new_privs, resource limits (gauntlet.judge.sandbox.limits), and the judge's
  watchdog (gauntlet.judge.process.watchdog, reading gauntlet.judge.sandbox.usage) on host memory, processes,
  threads, scratch disk and total time.

May import: the shared harness modules only (a leaf of the judge).
"""
from __future__ import annotations

import functools
import glob
import os
import platform

from ...discover import UsageError
from . import landlock, limits, seccomp

MODES = ("require", "auto", "off")
REQUIRED_ABI = 6          # signal and abstract-socket scoping: without them the candidate can signal the judge
DEVICE_NODES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/nvidiactl",
                "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


class Unavailable(Exception):
    """`--sandbox require` on a machine whose kernel cannot confine a worker: a usage error (exit 2)."""


@functools.lru_cache(maxsize=1)
def offered() -> dict:
    """What this kernel offers, probed once per process without confining anything."""
    return {"landlock_abi": landlock.abi(), "seccomp": seccomp.supported(), "arch": platform.machine(),
            "root": os.geteuid() == 0}


def missing() -> list[str]:
    """What `require` needs and this machine lacks (empty: the full confinement is possible)."""
    offer, out = offered(), []
    if offer["landlock_abi"] < REQUIRED_ABI:
        out.append(f"Landlock ABI >= {REQUIRED_ABI} (this kernel offers {offer['landlock_abi'] or 'none'})")
    if not offer["seccomp"]:
        out.append(f"seccomp filters on {offer['arch']}")
    return out


def check_mode(mode: str) -> None:
    """Raises Unavailable (or ValueError for an unknown mode) before any judging starts."""
    if mode not in MODES:
        raise UsageError(f"unknown sandbox mode {mode!r}; known: {', '.join(MODES)}")
    if mode == "require" and missing():
        raise Unavailable("--sandbox require: this machine cannot confine a worker: it lacks "
                          + "; ".join(missing()) + " (use --sandbox auto to judge with what it offers, recorded)")


def device_nodes() -> list[str]:
    found = [p for p in DEVICE_NODES if os.path.exists(p)]
    return found + sorted(glob.glob("/dev/nvidia[0-9]*") + glob.glob("/dev/nvidia-caps/*"))


class Confinement:
    """One worker's confinement: built in the judge before the fork, put in force by `preexec` in the child."""

    def __init__(self, mode: str, scratch: str, bounds: limits.Limits | None = None):
        check_mode(mode)
        self.mode, self.scratch = mode, scratch
        self.bounds = bounds or limits.Limits()
        self.ruleset = self.filter = None
        self.outside = None         # the worker's memory group, joined first (gauntlet.judge.sandbox.outside)
        offer = offered()
        if mode != "off" and offer["landlock_abi"]:
            self.ruleset = landlock.Ruleset(offer["landlock_abi"])
            self.ruleset.allow_beneath(scratch)
            for node in device_nodes():
                self.ruleset.allow_beneath(node, directory=False)
        if mode != "off" and offer["seccomp"]:
            self.filter = seccomp.Filter()

    def preexec(self) -> None:
        """In the forked child, just before exec: bounds, then capabilities, no_new_privs, Landlock, seccomp. Any
        failure raises, and subprocess reports it to the judge as a failed start (never a silently open worker)."""
        if self.outside is not None:
            self.outside.group.join()      # before anything of the worker is charged anywhere else
        limits.apply(self.bounds)
        if self.mode == "off":
            return
        if self.ruleset is not None:
            # Its own /proc/PID (CUDA writes there: cudaGetDeviceCount fails without it).
            # "/proc/self" here, after the fork, is the worker's own, and stays so through exec.
            self.ruleset.allow_beneath("/proc/self")
        for step, err in (("dropping capabilities", limits.drop_capabilities()),
                          ("no_new_privs", seccomp.no_new_privs()),
                          ("landlock", landlock.restrict_self(self.ruleset.fd) if self.ruleset else 0),
                          ("seccomp", self.filter.install() if self.filter else 0)):
            if err:
                raise OSError(err, f"sandbox: {step} failed: {os.strerror(err)}")

    def close(self) -> None:
        if self.ruleset is not None:
            self.ruleset.close()

    def describe(self) -> dict:
        """What was in force, for the record (`confinement`) and the fingerprint."""
        abi = self.ruleset.version if self.ruleset else 0
        return {"mode": self.mode, "landlock_abi": abi,
                "writes": "scratch dir and device nodes only" if abi else "unconfined",
                "other_processes": "no ptrace, /proc/PID/mem or fds" if abi else "unconfined",
                "signals": "own domain only" if abi >= 6 else "unconfined",
                "network": ("no connections, UNIX sockets only (seccomp)" if self.filter
                            else "TCP refused (Landlock)" if abi >= 4 else "unconfined"),
                "seccomp": bool(self.filter), "capabilities": "none" if self.mode != "off" else "inherited",
                "limits": self.bounds.as_record()}
