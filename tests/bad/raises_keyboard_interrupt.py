"""Known-bad: raises KeyboardInterrupt from solve (a BaseException, not an Exception), hoping to escape the
harness's `except Exception` and kill the run, or to look like the user pressing Ctrl-C. The worker catches
BaseException and reports it; the run goes on. Expected: crash."""
BACKEND = "torch"
EXPECTED = "crash"
DEVICE = "cpu"


def solve(a, b):
    raise KeyboardInterrupt
