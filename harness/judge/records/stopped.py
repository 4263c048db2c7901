"""What a command stopped by SIGINT or SIGTERM says (gauntlet.judge.records.interrupt does the stopping): the command
that resumes a run, the one line that tells what was judged and what was not, the mark in the results file, and the
`interrupted` record `gauntlet eval` prints in place of a verdict.

Kept apart from the CLI so that the words a user (or a CI log) reads after a stop can be tested without a run.
"""
from __future__ import annotations

import datetime as _dt
import os
import shlex
import shutil
import sys

SHOWN = 5      # not-judged keys named on the line; the results file holds all of them


def resume_command(argv: list[str], program: list[str] | None = None) -> str:
    """The same command without `--fresh` (run resumes by default, and --fresh would throw away what was kept),
    started the way this one was (`invoked_as`), so that it runs as printed, pasted into the same shell."""
    return shlex.join([*(program or invoked_as()), *(a for a in argv if a != "--fresh")])


def invoked_as(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """The command that started this process: `gauntlet` where that name on PATH is this very script; the script's
    absolute path where it is not (`.venv/bin/gauntlet` in a checkout whose venv is not activated: a bare `gauntlet`
    there is "command not found"); `<python> -m gauntlet` for `python -m gauntlet`, and for a caller that runs the
    CLI in-process (a test under pytest), where that is the one form sure to run this package."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = executable or sys.executable
    name = os.path.basename(argv0)
    if name.startswith("gauntlet") and not name.endswith(".py") and os.path.isfile(argv0):
        script = os.path.realpath(argv0)
        found = shutil.which(name)
        return [name] if found and os.path.realpath(found) == script else [os.path.abspath(argv0)]
    return [executable, "-m", "gauntlet"]


def run_mark(signal_name: str, plan: list[str], settled: set[str], in_flight: str | None, resume: str) -> dict:
    """The results file's `interrupted` entry: which signal, when, the solution abandoned mid-judgement, and every
    key of the plan that has no record from this run."""
    return {"signal": signal_name, "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "in_flight": in_flight, "judged": len([k for k in plan if k in settled]),
            "not_judged": [k for k in plan if k not in settled], "resume": resume}


def run_line(mark: dict, total: int, tally: dict, out: str) -> str:
    """One line: what was judged (and how), what was not, where the results are and the command that resumes."""
    rest = mark["not_judged"]
    named = ", ".join(rest[:SHOWN]) + (f" and {len(rest) - SHOWN} more" if len(rest) > SHOWN else "")
    flight = f", {mark['in_flight']} abandoned mid-judgement" if mark["in_flight"] else ""
    how = ", ".join(f"{v} {k}" for k, v in tally.items())
    return (f"gauntlet: stopped by {mark['signal']}: {mark['judged']} of {total} judged ({how}){flight}; "
            f"{len(rest)} not judged" + (f" ({named})" if rest else "") +
            f"; results kept in {out}; resume with: {mark['resume']}")


def eval_record(problem: str, solution: str, path: str, backend, device: str, signal_name: str):
    """`gauntlet eval` stopped before its verdict: a record whose verdict says only that."""
    from .results import EvalRecord
    from ...reasons import Reason
    record = EvalRecord(problem=problem, solution=solution, path=path, backend=backend, device=device,
                        verdict="interrupted")
    record.reasons.append(Reason("interrupted", f"stopped by {signal_name} before the judgement finished; "
                                                "nothing is known about the candidate").to_json())
    return record
