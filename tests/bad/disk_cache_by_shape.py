"""Known-bad: persists answers on disk keyed by shape and dtype (a file under $HOME/.cache), and serves them back,
so the cache survives the process: a later run (or a respawned worker) would read answers computed for other
inputs. The harness gives each child its own HOME and TMPDIR inside a temp directory it deletes afterwards, so the
file does not outlive the run here; within the run, later calls with fresh inputs get the first call's answer.
(An absolute path such as /tmp/... would survive across runs; then even a case's first call is wrong, reported
as mismatch since the judge's stale-answer history is per run.)
The corpus test replays one case (CASE) with an output of 33x17: the judge calls an output stale only from 16
elements up (a tiny output can equal an earlier answer by chance), so the fuzzer's first, 1x1x1 case would be
reported as a plain mismatch. Expected: stale_output."""
import os

import torch

BACKEND = "torch"
EXPECTED = "stale_output"
DEVICE = "cpu"
CASE = "M=33,N=17,K=65,seed=5"


def solve(a, b):
    folder = os.path.join(os.path.expanduser("~"), ".cache", "gemm_answers")
    os.makedirs(folder, exist_ok=True)
    name = f"{a.shape[0]}x{a.shape[1]}x{b.shape[1]}_{str(a.dtype).removeprefix('torch.')}.bin"
    path = os.path.join(folder, name)
    M, N = a.shape[0], b.shape[1]
    if os.path.exists(path):
        with open(path, "rb") as fh:
            raw = bytearray(fh.read())
        return torch.frombuffer(raw, dtype=a.dtype).reshape(M, N).to(a.device).clone()
    c = torch.matmul(a, b)
    with open(path, "wb") as fh:
        fh.write(c.cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return c
