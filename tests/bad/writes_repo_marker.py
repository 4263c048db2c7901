"""Known-bad: writes outside its sandbox: appends a line to a file in the source tree (tests/_tamper_marker under the
repository the harness runs from, found through harness.__file__), standing in for a candidate that edits the
harness, a problem or another solution. The child runs with its own temp dir as cwd, HOME and TMPDIR, but nothing
stops it writing wherever the user can. The planned check -- the repository tree is unchanged after a candidate
(hash of tracked and untracked files, __pycache__ included) -- reports it. The corpus test runs this file inside a
scratch copy of the repository (SCRATCH_REPO) so the real tree is never written and parallel tests are not
disturbed. A write to /tmp (say /tmp/gauntlet_escape_marker) is not detectable by the harness and is not claimed
to be: only a sandbox (read-only mounts, a private /tmp) stops it. Expected: tampering."""
import os

import harness
import torch

BACKEND = "torch"
EXPECTED = "tampering"
DEVICE = "cpu"
SCRATCH_REPO = True

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(harness.__file__)))


def solve(a, b):
    with open(os.path.join(_ROOT, "tests", "_tamper_marker"), "a") as fh:
        fh.write(f"candidate pid {os.getpid()} was here\n")
    return torch.matmul(a, b)
