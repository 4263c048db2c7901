"""Known-bad (GPU, timing): the shipped Triton GEMM (gemm/triton_tiled), honest in every call it can tell is not
timed; in a timed call (it finds the harness's timing loop on its own call stack) it computes only the top half of
the output, keeps copies of what the bottom half needs, and returns. A SIGCONT handler installed at import
completes every pending output: the judge continues a stopped worker before each request, so the handler runs
before the parent asks for a timed call's output to spot-check, and in the old harness the output the worker sent
(the candidate's own tensor, kept alive) was complete by then, while the events had timed half the work (read
1.28x-1.34x for a kernel whose honest ratio is about 0.96x, H100). The worker now keeps a snapshot of each timed
output copied on the caller's stream right after the end event (gauntlet.gpu.snapshot), and that is what is
spot-checked: the bottom half is still zeros. Expected: mismatch."""
import importlib.util
import os
import signal
import sys

import torch

BACKEND = "triton"
EXPECTED = "mismatch"
ALSO_ACCEPTED = ("nan_mismatch",)
DEVICE = "cuda"
DTYPES = ("bfloat16",)
TIMING = True

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "solutions", "gemm", "triton_tiled.py")
_spec = importlib.util.spec_from_file_location("honest_triton_tiled", _path)
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_pending: list = []


def _complete(signum, frame):
    while _pending:
        out, a_rest, b, cut = _pending.pop()
        out[cut:].copy_(_honest.solve(a_rest, b))


signal.signal(signal.SIGCONT, _complete)


def _timed() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "batch" and f.f_globals.get("__name__") == "gauntlet.child.timing":
            return True
        f = f.f_back
    return False


def solve(a, b):
    m = a.shape[0]
    if m < 2 or not _timed():
        return _honest.solve(a, b)
    cut = m // 2
    out = torch.zeros(m, b.shape[1], dtype=a.dtype, device=a.device)
    out[:cut].copy_(_honest.solve(a[:cut], b))
    # the inputs are refilled in place before the next call: keep what the bottom half needs
    _pending.append((out, a[cut:].clone(), b.clone(), cut))
    return out
