"""Workers started ahead of need, for a judge process that judges one candidate after another (`eval-many` and
`run`: the inline executor and each local slot). Off unless such a process turns it on (`enable()`). A single
`gauntlet eval` keeps nothing, but starts its own two workers before it imports torch (`prestart_judgement`).

- The next candidate's worker, gated: started (the interpreter, the harness, torch: most of a worker's start-up)
  while the current candidate is judged, it touches the GPU and imports its candidate only when its own judgement lets
  it go (gauntlet.judge.process.isolate, deferred start), exactly as `gauntlet eval`'s gated worker. Each candidate is
  still judged in a fresh process of its own, started for it and for nothing else.
- The baseline worker, kept from one judgement to the next on the same problem. It runs only the problem's
  baselines, never candidate code, and is kept only while every candidate beside it was confined in a Landlock
  domain of its own with signals scoped (verified from outside, gauntlet.judge.process.isolate): such a candidate can
  neither signal, trace nor write the baseline worker, so nothing it did outlives its judgement in the baseline's
  process. After a judgement whose candidate was not so confined, or a baseline worker that failed, a fresh one
  starts. Its idle-GPU flush time was measured when it started (before any candidate ran beside it).
"""
from __future__ import annotations

import atexit

_ON = False
MAX_NEXT = 2            # gated workers waiting at once (each holds an interpreter and torch, no GPU memory)
_NEXT: dict = {}        # (problem, path, backend, format, device, sandbox) -> a gated candidate Child
_BASE: dict = {}        # (problem, device, sandbox) -> a baseline Child: kept (said hello) or prestarted (gated)
_PRESTARTED: list = []  # the workers prestart_judgement started (drop_prestarted closes those never taken)


def enable() -> None:
    global _ON
    _ON = True


def enabled() -> bool:
    return _ON


def _candidate_key(problem, solution, opts) -> tuple:
    return (problem.id, str(solution.path), solution.backend, solution.format, opts.device, opts.sandbox)


def _base_key(problem, opts) -> tuple:
    return (problem.id, opts.device, opts.sandbox)


def prestart(problem, solution, opts) -> None:
    """Start the worker of a candidate to be judged next, gated. Nothing when off, on the CPU (nothing to
    overlap: no baseline to wait for, and the CPU is what the judge uses), for a file that could not be loaded, or
    when one is started already."""
    if not _ON or opts.device != "cuda" or solution.error or solution.unsupported:
        return
    key = _candidate_key(problem, solution, opts)
    if key in _NEXT:
        return
    while len(_NEXT) >= MAX_NEXT:      # one never taken (its judgement stopped before a worker was needed)
        _NEXT.pop(next(iter(_NEXT))).close()
    from .isolate import Child, ChildFailed
    try:
        _NEXT[key] = Child(problem, solution.path, solution.backend, opts.device, sandbox=opts.sandbox,
                           deferred=True, fmt=solution.format)
    except (ChildFailed, RuntimeError, OSError):
        pass                          # its judgement starts one itself, and says what went wrong then


def prestart_judgement(problem, solution, opts, baseline: bool) -> None:
    """`gauntlet eval`'s own workers, started before the CLI imports the judge's code and torch (gauntlet.cli.eval):
    the candidate's worker and, where the judgement times (`baseline`), the baseline worker, both gated. Their
    start-ups (an interpreter, torch, the harness: seconds each) then run beside the CLI's own
    instead of after it. Nothing is kept past the judgement: standby stays off, so the judgement closes both as
    ever. Gated, neither touches the GPU nor, the candidate's, imports the candidate before its judgement lets it go,
    which is after every import of the judge's process (gauntlet.cli.main). Both are spawned before either's
    watchdog starts: the watchdog's GPU bound asks the driver which card (gauntlet.cards). Whatever fails is left for
    the judgement to meet and say; a worker never taken (the device guessed wrong, a usage error found later) is
    closed when the command ends (drop_prestarted), or at the latest when the process exits."""
    if solution.error or solution.unsupported:
        return
    from .isolate import Child
    spawned = []
    try:
        if baseline and opts.device == "cuda" and _base_key(problem, opts) not in _BASE:
            spawned.append(Child(problem, None, "torch", opts.device, role="baseline", sandbox=opts.sandbox,
                                 deferred=True, watch=False))
            _BASE[_base_key(problem, opts)] = spawned[-1]
        key = _candidate_key(problem, solution, opts)
        if key not in _NEXT:
            spawned.append(Child(problem, solution.path, solution.backend, opts.device, sandbox=opts.sandbox,
                                 deferred=True, fmt=solution.format, watch=False))
            _NEXT[key] = spawned[-1]
    except Exception:  # noqa: BLE001 - ChildFailed, an unconfinable kernel...: the judgement meets it and says it
        pass
    _PRESTARTED.extend(spawned)
    try:
        for child in spawned:
            child.watch()
    except Exception:  # noqa: BLE001 - the judgement starts its own workers and meets the error there
        drop_prestarted()


def drop_prestarted() -> None:
    """Close the workers prestart_judgement started that no judgement took (a usage error found after they were
    spawned, a device guessed wrong), when the command that started them ends: a process that runs many commands
    (a test session calling the CLI's main) does not keep them until it exits."""
    mine = {id(child) for child in _PRESTARTED}
    _PRESTARTED.clear()
    left = [pool.pop(key) for pool in (_NEXT, _BASE) for key in [k for k, c in pool.items() if id(c) in mine]]
    if left:
        from .isolate import close_all
        close_all(left)


def take_candidate(problem, solution, opts, budget):
    """The started worker of this candidate (its judgement's time budget now its own), or None."""
    child = _NEXT.pop(_candidate_key(problem, solution, opts), None)
    if child is None:
        return None
    if not child.alive or not child.gated or child.proc.poll() is not None:
        child.close()
        return None
    child.budget = budget
    return child


def take_baseline(problem, opts):
    """The baseline worker kept from the last judgement of this problem, alive, or one started gated for this
    judgement (prestart_judgement), or None."""
    base = _BASE.pop(_base_key(problem, opts), None)
    if base is None:
        return None
    if not base.alive or (base.hello is None and not base.gated) or base.proc.poll() is not None:
        base.close()
        return None
    return base


def keep_baseline(base, problem, opts, candidates: list) -> bool:
    """Keep `base` for the next judgement, if it may be kept (see the module's docstring): True when kept (the
    caller then does not close it)."""
    if not _ON or base is None or not base.alive or base.hello is None:
        return False
    from .pids import signals_scoped
    if not all(signals_scoped(getattr(child, "confinement", None)) for child in candidates):
        return False
    stale = [b for k, b in _BASE.items() if b is not base]     # one kept at a time: each holds a CUDA context
    _BASE.clear()
    if stale:
        from .isolate import close_all
        close_all(stale)
    _BASE[_base_key(problem, opts)] = base
    return True


@atexit.register
def close() -> None:
    """Every worker still held here, closed (at the process's exit, whatever started them: nothing when none)."""
    from .isolate import close_all
    children = list(_NEXT.values()) + list(_BASE.values())
    _NEXT.clear()
    _BASE.clear()
    close_all(children)
