"""Known-bad: replaces harness.child.timing.time_sides and harness.judge.scoring.median from the candidate's module body, while
computing the right answer. On the GPU this one would work: the child runs `from harness import timing` only when
the first timing request arrives, gets the module the candidate already imported and patched, and reports whatever
times the fake returns (here: the real result with the candidate's times divided by 100). The in-child watch
snapshots only harness modules already imported when it starts, and harness.child.timing is not one of them, so today
nothing reports it (on the CPU, where there is no timing, the verdict is pass). Expected: tampering."""
import harness.judge.scoring
import harness.child.timing
import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"

_real_time_sides = harness.child.timing.time_sides


def _fast_time_sides(sides, *args, **kwargs):
    result = _real_time_sides(sides, *args, **kwargs)
    cand = result.get("candidate", {})
    if "ms" in cand:
        cand["ms"] = [t / 100 for t in cand["ms"]]
        cand["wall_ms"] = [t / 100 for t in cand["wall_ms"]]
    return result


harness.child.timing.time_sides = _fast_time_sides
harness.judge.scoring.median = lambda xs: min(xs)


def solve(a, b):
    return torch.matmul(a, b)
