"""Known-bad: rebinds the harness's launch mark (gauntlet.child.profiling.LAUNCH_MARK) to an instance of a `str`
subclass that compares equal to anything and is empty as a string, so every profiler event would read as a launch of
its own and the snapshot's comparison (`!=`, which Python asks the subclass first) would call it unchanged; then
computes with torch.mm. The harness's fingerprints compare exact types and identities, never through the
candidate's own __eq__/__ne__ (gauntlet.child.integrity). Expected: tampering."""
import torch

import gauntlet.child.profiling as profiling

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"
DTYPES = ("float32",)


class Anything(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


def solve(a, b):
    profiling.LAUNCH_MARK = Anything("")
    return torch.mm(a, b)
