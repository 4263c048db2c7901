"""The worker's own look at its confinement, taken at start-up before torch or any candidate code is imported: may
it write beside its scratch dir? (It must not, where the judge put Landlock in force.) The judge reads the rest
(no_new_privs, the seccomp filter, capabilities) from /proc/PID/status, outside this process."""
from __future__ import annotations

import os


def self_test() -> dict:
    scratch = os.getcwd()
    probe = os.path.join(os.path.dirname(scratch), f".gauntlet-confinement-probe-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except PermissionError:
        return {"writes_refused": True}
    except OSError as exc:
        return {"writes_refused": False, "error": str(exc)}
    os.close(fd)
    os.unlink(probe)
    return {"writes_refused": False}
