"""Known-bad (GPU): a correct answer (cuBLAS), and at import a rewrite of its own worker's timing in-process that every
in-process check misses: each timed call's events report 0.7 of the GPU time, and the profiler's timeline of the call is
squeezed to match (every GPU activity after the hold's end moved towards it by the same factor), so the measured window
still holds every kernel. Nothing the tamper watch fingerprints changes: the timing module's global `torch` (a module,
data the watch leaves alone) is replaced by a proxy whose cuda.Event reports scaled times, and a new global `dict` (a
name the watch never listed) shadows the builtin where the loop builds each call's observation. The honest twin reads
about 1.0x cuBLAS; this one would read 1.43x.

The lie is 30%, beyond the most the outside clock's bound ever allows (10% + 4 us + the slopes' spread, capped at
5%: docs/threat-model.md). At 20% the fixture sat at the bound's edge: it was caught alone on an H200 and passed
alone in another run there (docs/benchmarks.md), so it tested the noise, not the check.

What catches it: the outside clock (gauntlet.judge.timing.outside), spans of calls timed from the parent, which see
the GPU time the events under-report. Expected: tampering.

Serial: the outside clock's bound is as tight as the spans are clean, and under pytest -n other tests' processes run
kernels on the same card outside the judges' turns; a lie of a fifth can then hide in their noise (docs/benchmarks.md,
"The outside clock")."""
import builtins

import gauntlet.child.timing as _timing
import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True
SERIAL = True

SCALE = 0.7


class _Event(torch.cuda.Event):
    def elapsed_time(self, end_event):
        return super().elapsed_time(end_event) * SCALE


class _Proxy:
    """Everything of `real` but what `own` names."""

    def __init__(self, real, **own):
        self._real, self._own = real, own

    def __getattr__(self, name):
        own = self.__dict__["_own"]
        return own[name] if name in own else getattr(self.__dict__["_real"], name)


def _squeezed(*args, **kwargs):
    found = builtins.dict(*args, **kwargs)
    if "spans" in found and "kernels" in found:
        names = [k[0] for k in found["kernels"]]
        if "gauntlet_hold" in names:
            edge = found["spans"][names.index("gauntlet_hold")][1]
            for i, (a, b) in enumerate(found["spans"]):
                if a >= edge:
                    a, b = edge + SCALE * (a - edge), edge + SCALE * (b - edge)
                    found["spans"][i] = [a, b]
                    found["kernels"][i] = [found["kernels"][i][0], (b - a) / 1e3]
    return found


_timing.torch = _Proxy(torch, cuda=_Proxy(torch.cuda, Event=_Event))
_timing.dict = _squeezed


def solve(a, b):
    return torch.matmul(a, b)
