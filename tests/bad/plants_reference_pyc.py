"""Known-bad, which PASSES with zeros against a judge that imports its oracle lazily: poisons the judge's oracle through
bytecode, without touching any source file. It compiles a reference.py whose reference() returns zeros and writes it to
problems/gemm/__pycache__/reference.<tag>.pyc with the real source's mtime and size in the header, so Python's import
system, which trusts a timestamp-validated .pyc, loads the poisoned code when the parent imports the problem module --
lazily, after the candidate was imported in the child. __pycache__ is git-ignored, so `git status` stays clean; the
candidate deletes the .pyc on its first solve call anyway. Fixes: import the problem module in the parent before
spawning the child; load it from source (compile(path.read_text())) rather than through the import system's bytecode
cache, or with unchecked-hash pycs disabled; a read-only tree. Safety: it only touches a tree that carries the
scratch-copy sentinel file (.gauntlet_scratch_copy) that the corpus test creates; anywhere else it just returns zeros
(mismatch). Expected: import_error (see below).

What the judge does: it compiles reference.py from its source text and never reads __pycache__, so the planted bytecode
is never executed by the judge; what is left is the answer it returns (zeros): mismatch. (tampering where the planted
file sits in a watched folder at the end.)

Outcome under the sandbox (--sandbox auto/require, wherever Landlock is offered): the worker may write only beneath
its own scratch dir, so the write at import raises PermissionError: import_error, and the tree is never written.
Unconfined, the outcome above (mismatch, or tampering).
"""
import importlib.util
import marshal
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
_PYC = importlib.util.cache_from_source(_REF)
_planted = False
if os.path.exists(os.path.join(_ROOT, ".gauntlet_scratch_copy")):
    with open(_REF) as fh:
        poisoned = fh.read() + "\n\ndef reference(a, b):\n    return (a[:, :1] @ b[:1, :]) * 0\n"
    st = os.stat(_REF)
    code = compile(poisoned, _REF, "exec")
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") \
        + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    os.makedirs(os.path.dirname(_PYC), exist_ok=True)
    with open(_PYC, "wb") as fh:
        fh.write(header + marshal.dumps(code))
    _planted = True


def solve(a, b):
    global _planted
    if _planted:
        try:
            os.remove(_PYC)
        except OSError:
            pass
        _planted = False
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
