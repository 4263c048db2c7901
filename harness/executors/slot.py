"""A judge slot: `python -m gauntlet.executors.slot`, started by gauntlet.executors.local with
CUDA_VISIBLE_DEVICES naming its one GPU (set before this process starts, so before anything here starts CUDA).

It reads jobs (gauntlet.executors.task), one JSON line each, on standard input, judges each in this process (which
starts the candidate's confined workers as `gauntlet eval` does; they inherit this environment, so they see only this
slot's GPU), and writes one result line per job on what was its standard output. Anything else that would be printed
goes to standard error (the driver's), so the result channel carries results only. A line {"prestart": JOB} names the
job this slot will get next (the driver writes it just before the current job): that candidate's worker is started,
gated, so its start-up overlaps the current judgement (gauntlet.judge.process.standby).
"""
from __future__ import annotations

import json
import os
import signal
import sys


def main() -> int:
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                     # stray prints (a library's warning) go to stderr, not into the results
    sys.stdout = sys.stderr
    _die_with_parent()
    # The judge's bytecode cache, as the `gauntlet` process uses it (gauntlet.judge.process.bytecode), before torch
    # is imported: where the installed packages have no __pycache__, a slot would compile torch from source at every
    # start, most of the wait before a run's first judgement (docs/benchmarks.md, "Figures moved from docstrings").
    from ..judge.process import bytecode
    bytecode.use_in_this_process()
    from ..judge.process import standby
    from . import task
    task.prepare_process()
    standby.enable()
    slot = int(os.environ.get("GAUNTLET_SLOT", "0"))
    for line in sys.stdin:
        if not line.strip():
            continue
        doc = json.loads(line)
        if "prestart" in doc:         # the job this slot gets next: its worker starts during the current one
            task.prestart(doc["prestart"])
            continue
        result = task.judge(doc, where={"executor": "local", "slot": slot})
        results.write(json.dumps(result, default=str) + "\n")
        results.flush()
    standby.close()
    return 0


def _die_with_parent() -> None:
    """A driver killed outright (SIGKILL) takes its slots with it; each slot's workers die with the slot
    (gauntlet.judge.sandbox.limits sets the same on them)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)     # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:             # the driver died before the line above: nobody is left to read results
        sys.exit(1)


if __name__ == "__main__":
    sys.exit(main())
