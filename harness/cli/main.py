"""`gauntlet`'s entry point: the parser assembled from every command's, the command run, and what every
command shares on the way out (exit codes, the one JSON object of --json on an error or a stop)."""
from __future__ import annotations

import argparse
import sys
import traceback

from .. import discover
from . import new, options, output, report
from . import eval as eval_cmd
from . import eval_many, mutate
from . import list as list_cmd
from . import run as run_cmd
from ..discover import UsageError
from ..judge.process import bytecode, standby
from ..judge.records import interrupt, stopped
from ..judge.records.gate import GateError
from ..mutate.mutants import NotMutable
from ..problem import ProblemError
from ..searchpath import SearchPathError
from ..reports.compare import CompareError
from ..reports.load import BadResults

INTERNAL_ERROR = 3          # exit status of a harness bug (0/1: verdicts, 2: usage, 130/143: stopped)
# What the user gave and Gauntlet refused: an argument, a file, a setting, a search path, a stored results file.
USER_ERRORS = (UsageError, SearchPathError, GateError, NotMutable, CompareError, BadResults)
LEADERBOARD_COMMANDS = ("run", "report")   # the commands that import gauntlet.reports.leaderboard (after judging)
JUDGING_COMMANDS = ("eval", "eval-many", "run", "mutate")   # the commands that start workers
COMMANDS = (list_cmd, new, eval_cmd, eval_many, run_cmd, mutate, report)   # `gauntlet --help`'s order


def main(argv: list[str] | None = None) -> int:
    if argv is None:                     # the `gauntlet` process itself (not a caller's, such as a test's)
        bytecode.use_in_this_process()   # before torch is imported: gauntlet.judge.process.bytecode says why
        _leave(_main(sys.argv[1:]))
    return _main(list(argv))


def _leave(status: int) -> None:
    """End the `gauntlet` process once its command is done: exit handlers run (workers closed, temporary folders
    removed, logs flushed) and the streams are flushed, but the interpreter's own teardown (torch's modules, the
    judge's CUDA context: half a second and more, after the verdict is already out) is skipped. Where a thread that
    is not a daemon is still running, the ordinary exit waits for it instead."""
    import atexit
    import os
    import threading
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status if isinstance(status, int) else 1)


def _main(argv: list[str]) -> int:
    want_json = "--json" in argv
    _undumpable()
    parser = _parser()
    if not argv:                         # bare `gauntlet`: what it can do, not "the following arguments are required"
        parser.print_help(sys.stderr)
        return 2
    output.JSON_SAID[0] = False
    hint: list[str] = []

    def last_words():
        # A second signal ends the process at once: a --json caller still gets its one object, a run's user the
        # way back (the results file is whole: every write of it is atomic).
        if want_json:
            output.emit_json(output.interrupted_doc("a second signal came while stopping: stopped at once"))
        for line in hint:
            print(line, file=sys.stderr)

    with interrupt.handle(last_words):
        try:
            args = parser.parse_args(argv)
            args.argv = argv
            if args.command == "run":
                hint.append(f"gauntlet: what was judged is kept in {args.out}; resume with: "
                            f"{stopped.resume_command(argv)}")
            previous = discover.use(options.search_path(args))
            try:
                if args.command in JUDGING_COMMANDS:
                    bytecode.warm_soon()     # the workers' bytecode, compiled beside this process's own imports
                if getattr(args, "prestart", None):
                    args.prestart(args)      # workers started gated, before the imports below (gauntlet.cli.eval)
                _import_everything(args.command)
                return args.func(args)
            finally:
                standby.drop_prestarted()    # any not taken: a usage error found after they were spawned
                discover.use(previous)
        except (*USER_ERRORS, ProblemError) as exc:
            # Whose fault: a problem file that breaks the contract is its author's; what the user asked for, the
            # user's (UsageError, raised where an argument, a file or a setting given is checked).
            blame = "problem" if isinstance(exc, ProblemError) else "user"
            print(f"gauntlet: error: {exc}", file=sys.stderr)
            if want_json:
                output.emit_json({"schema": "gauntlet.eval/1", "verdict": "usage_error", "blame": blame,
                                  "error": str(exc)})
            return 2
        except interrupt.Interrupted as stop:
            # Stopped outside a judgement (starting up, or after the verdict was printed): nothing to keep.
            print(f"gauntlet: stopped by {stop.name}", file=sys.stderr)
            if want_json:
                output.emit_json(output.interrupted_doc(f"stopped by {stop.name} before any judgement began"))
            return stop.status
        except Exception as exc:         # noqa: BLE001 - a harness bug (an interrupt is not an Exception)
            # Not the user's: an unexpected exception (a ValueError included) is not a usage error. Candidate
            # failures never get here (they are verdicts); what does is a harness bug.
            print(f"gauntlet: internal error (a bug in Gauntlet, not in your input): {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
            if want_json:
                output.emit_json({"schema": "gauntlet.eval/1", "verdict": "internal_error", "blame": "harness",
                                  "error": f"{type(exc).__name__}: {exc}"})
            return INTERNAL_ERROR


def _undumpable() -> None:
    """PR_SET_DUMPABLE 0 on the judge: a process of the same user without CAP_SYS_PTRACE (an unconfined
    candidate, `--sandbox off`) can then neither read nor write its memory (/proc/PID/mem) nor open its descriptors
    (/proc/PID/fd/1, its stdout). Every judge process does the same (gauntlet.executors.task)."""
    from ..executors import task
    task.undumpable()


class _Parser(argparse.ArgumentParser):
    """argparse that raises a UsageError instead of exiting, so `--json` still prints its one object."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gauntlet", description="Hold GPU kernels to a specification.",
                epilog="`gauntlet COMMAND --help` for a command's options; docs/guide.md has the whole story.")
    p.add_argument("--version", action="version", version=f"gauntlet {options.version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, title="commands", metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return p


def _import_everything(command: str) -> None:
    """Import all judge-side code before any candidate runs: a candidate that rewrote a harness or report file
    on disk must not get its code imported into this (trusted) process later in the run. The leaderboard (and
    matplotlib under it: a quarter of a second) only for the commands that build one; the others never import it."""
    from ..executors import task
    task.import_judge_code(leaderboard=command in LEADERBOARD_COMMANDS)
