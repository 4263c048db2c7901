"""Known-bad (issue 16): a `.pth` file dropped into the environment's site-packages ran in every later Gauntlet
process, and there recorded a zeros kernel as pass. Here the .pth only sets an environment variable
(GAUNTLET_PTH_PLANTED) in whatever starts later, and solve returns zeros, so the verdict is a mismatch either
way: tests/test_sandbox.py asserts that no such file exists after the judgement (and removes one if it does).
Confined, the worker may write only beneath its scratch dir: the write is refused. Expected: mismatch."""
import os
import site

import torch

BACKEND = "torch"
EXPECTED = "mismatch"
DEVICE = "cpu"

for folder in site.getsitepackages():
    try:
        with open(os.path.join(folder, "zz_gauntlet_planted.pth"), "w") as fh:
            fh.write("import os; os.environ.setdefault('GAUNTLET_PTH_PLANTED', '1')\n")
    except OSError:
        pass


def solve(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
