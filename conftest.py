"""Kept small: pin each pytest-xdist worker to one GPU before CUDA starts, and load the gauntlet plugin when the
package's pytest11 entry point is not installed (a plain checkout)."""
import os
import subprocess
from importlib import metadata


def _gpu_count() -> int:
    # nvidia-smi, not torch: initialising CUDA here would pin every worker to the same device.
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and "CUDA_VISIBLE_DEVICES" not in os.environ:
    _n = _gpu_count()
    if _n > 1:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(int(_worker[2:]) % _n)

if not any(ep.name == "gauntlet" for ep in metadata.entry_points(group="pytest11")):
    pytest_plugins = ["harness.plugin"]
