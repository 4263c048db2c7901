"""Known-bad (GPU, timing): the shipped Triton GEMM (gemm/triton_tiled), honest in every call it can tell is not timed;
in a timed call (it finds the harness's timing loop on its own call stack: an in-process candidate can always tell,
which is why nothing about timing may rest on it not knowing) it computes the first third of the rows on the caller's
stream and the other two thirds on a side stream that starts when the first part is done and that the caller's stream
never waits for. solve returns while that work still runs: the end event, recorded on the caller's stream, fires without
it, and the events time a part of the work (a third deferred reads far above the kernel's honest ratio). The profiler's
timeline of the timed calls shows the deferred kernel ending after the end event (gauntlet.judge.timing.window):
tampering, named, before any figure is kept. A third deferred already ends tens of microseconds after the end event (the
host's own launch time hides some of it); two thirds leave more past the end. (Its output's snapshot, taken on the
caller's stream right after the end event, is missing that part as well.) Expected: tampering."""
import importlib.util
import os
import sys

import torch

BACKEND = "triton"
EXPECTED = "tampering"
ALSO_ACCEPTED = ("mismatch", "nan_mismatch")
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solutions", "gemm", "triton_tiled.py")
_spec = importlib.util.spec_from_file_location("honest_triton_tiled", _path)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_side = None


def _timed() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "batch" and f.f_globals.get("__name__") == "gauntlet.child.timing":
            return True
        f = f.f_back
    return False


def solve(a, b):
    global _side
    m = a.shape[0]
    if m < 6 or not _timed():
        return _honest.solve(a, b)
    if _side is None:
        _side = torch.cuda.Stream()
    cut = m // 3
    out = torch.empty(m, b.shape[1], dtype=a.dtype, device=a.device)
    caller = torch.cuda.current_stream()
    out[:cut].copy_(_honest.solve(a[:cut], b))
    first_part = torch.cuda.Event()
    first_part.record(caller)
    _side.wait_event(first_part)
    with torch.cuda.stream(_side):
        out[cut:].copy_(_honest.solve(a[cut:], b))
    out.record_stream(_side)
    return out                                        # the caller's stream never waits for the side stream
