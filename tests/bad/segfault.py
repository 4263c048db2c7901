"""Known-bad: dereferences a null pointer, killing its process with SIGSEGV. Expected: crash (and the run goes on)."""
import ctypes

BACKEND = "torch"


def solve(a, b):
    return ctypes.string_at(0)
