"""What confinement was in force on a worker, as the judge set it (gauntlet.judge.sandbox), as the judge reads it from
outside the worker (/proc/PID/status), and as the worker found it before any candidate code ran."""
from __future__ import annotations


def verify(child, hello: dict) -> dict:
    """What was in force, as the judge set it and as it reads it from outside (/proc/PID/status) and the worker
    found it before any candidate code ran (a write beside its scratch dir refused)."""
    out = child.sandbox.describe()
    status = {}
    try:
        with open(f"/proc/{child.proc.pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                status[key] = value.strip()
    except OSError:
        pass
    seen = {"no_new_privs": status.get("NoNewPrivs") == "1", "seccomp_filter": status.get("Seccomp") == "2",
            "no_capabilities": status.get("CapEff", "").strip("0") == "",
            "writes_refused": bool((hello.get("confined") or {}).get("writes_refused"))}
    want = {"no_new_privs": child.sandbox.mode != "off", "seccomp_filter": bool(child.sandbox.filter),
            "no_capabilities": child.sandbox.mode != "off", "writes_refused": bool(child.sandbox.ruleset)}
    out["verified"] = all(seen[k] for k, v in want.items() if v) and bool(status)
    out["watchdog"] = child.watchdog.bounds.as_record()
    out["memory_bound"] = child.outside.group.describe()    # the kernel's bound, or why there is none here
    if child.sandbox.mode == "require" and not out["verified"]:
        child.close()
        raise RuntimeError(f"--sandbox require: the {child.role} worker is not confined as set: "
                           f"{ {k: seen[k] for k, v in want.items() if v} }")
    return out
