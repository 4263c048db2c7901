"""Known-bad: calls sys.exit(0) inside solve, hoping a clean exit status reads as success (cf. exits_early, which
uses os._exit). SystemExit is an exception: the worker catches it and reports it; the process does not exit.
Expected: crash."""
import sys

BACKEND = "torch"
EXPECTED = "crash"
DEVICE = "cpu"


def solve(a, b):
    sys.exit(0)
