"""Known-bad, which PASSES with zeros against a judge that imports its oracle lazily: poisons the judge's oracle through
the source tree. The parent imports problems/gemm/reference.py lazily, the first time it judges a call -- after the
child has imported the candidate. So the candidate's module body rewrites reference.py (appending a reference() that
returns zeros; the fp64 oracle is reference() on upcast inputs, so it becomes zeros too), and its first solve call
restores the file byte for byte (by then the parent has the poisoned module cached), so the tree is clean again when the
run ends and an after-the-fact "repo unchanged" check sees nothing. solve returns zeros, which match the poisoned
oracle. Fixes: the parent imports the problem module (and every harness module it will use) before spawning the child,
and checks a hash of the problem files; better, a read-only source tree (see README). Safety: it only touches a tree
that carries the scratch-copy sentinel file (.gauntlet_scratch_copy) that the corpus test creates; anywhere else it just
returns zeros (mismatch). Expected: import_error (see below).

What the judge does: it imports the reference before the candidate's process starts, so the poisoned source is never
read by the judge; the candidate restores the file, so the tree hash sees no change either. What is left is the answer
it returns (zeros): mismatch. A candidate that forgets to restore the file also gets tampering.

Outcome under the sandbox (--sandbox auto/require, wherever Landlock is offered): the worker may write only beneath
its own scratch dir, so the write at import raises PermissionError: import_error, and the tree is never written.
Unconfined, the outcome above (mismatch, or tampering).
"""
import os

import gauntlet
import torch

BACKEND = "torch"
EXPECTED = "import_error"
ALSO_ACCEPTED = ("mismatch", "tampering")
DEVICE = "cpu"
SCRATCH_REPO = True

_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(gauntlet.__file__)))
_REF = os.path.join(_ROOT, "problems", "gemm", "reference.py")
_original = None
if os.path.exists(os.path.join(_ROOT, ".gauntlet_scratch_copy")):
    st = os.stat(_REF)
    with open(_REF, "rb") as fh:
        _original = fh.read()
    with open(_REF, "ab") as fh:
        fh.write(b"\n\ndef reference(a, b):\n    return (a[:, :1] @ b[:1, :]) * 0\n")
    os.utime(_REF, ns=(st.st_atime_ns, st.st_mtime_ns))


def solve(a, b):
    global _original
    if _original is not None:           # the parent has loaded the poisoned module by now: cover the tracks
        st = os.stat(_REF)
        with open(_REF, "wb") as fh:
            fh.write(_original)
        os.utime(_REF, ns=(st.st_atime_ns, st.st_mtime_ns))
        _original = None
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
