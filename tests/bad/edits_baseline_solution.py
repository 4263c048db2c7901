"""Known-bad: writes outside its sandbox, into the source tree: appends a line to the baseline it is timed against
(solutions/gemm/torch_matmul.py, found through gauntlet.__file__). Here the line is a harmless comment; a real
attack would slow the baseline down (every later run would time the candidate against a handicapped cuBLAS) or
plant code that runs in the judge. The child runs with its own temp dir as cwd, HOME and TMPDIR, but nothing
stops it writing wherever the user can. The parent hashes the watched tree (harness/, the problem's folder, its
baselines, conftest.py, pyproject.toml) before and after each candidate. (A write to /tmp, or into tests/, is
outside the watched paths and not claimed to be detectable: only a sandbox -- read-only mounts, a private /tmp --
stops it.) The corpus test runs this file inside a scratch copy of the repository (SCRATCH_REPO), so the real tree
is never written; outside a tree marked as scratch (.gauntlet_scratch_copy) it writes nothing and just computes.
Expected: crash (see below).

Outcome under the sandbox (--sandbox auto/require, wherever Landlock is offered): the worker may write only
beneath its own scratch dir, so the append raises PermissionError in solve: crash, and the tree is never written.
Where the kernel cannot confine (auto falls back to unconfined): the tree hash sees the edit, tampering."""
import os

import gauntlet
import torch

BACKEND = "torch"
EXPECTED = "crash"
ALSO_ACCEPTED = ("tampering",)
DEVICE = "cpu"
SCRATCH_REPO = True

_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(gauntlet.__file__)))


def solve(a, b):
    if os.path.exists(os.path.join(_ROOT, ".gauntlet_scratch_copy")):
        with open(os.path.join(_ROOT, "solutions", "gemm", "torch_matmul.py"), "a") as fh:
            fh.write(f"# candidate pid {os.getpid()} was here\n")
    return torch.matmul(a, b)
