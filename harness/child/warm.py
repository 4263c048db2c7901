"""Fill the judge's bytecode cache (harness.judge.process.bytecode): import what a worker imports before it sees any
candidate (torch, the profiler's lazy imports, Triton, the harness), in a process of its own that runs no candidate
code, with PYTHONPYCACHEPREFIX pointing at the cache. Started by the judge by module name, as workers are."""
import importlib
import os

# What a worker imports before any candidate code, besides the harness.
PACKAGES = ("torch", "triton", "triton.experimental.gluon", "numpy", "cupy", "cutlass", "hypothesis", "yaml")


def main() -> None:
    for name in PACKAGES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional package that is absent or fails: nothing to cache
            pass
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]):     # its first session imports torch._dynamo and more
        torch.zeros(4).add_(1)
    from harness.child import guard
    guard.import_harness()
    for name in ("harness.child.worker", "harness.child.timing", "harness.child.profiling", "harness.gpu"):
        importlib.import_module(name)
    from harness.backends import triton_key
    triton_key.store(os.environ.get(triton_key.ENV))      # Triton's digest of itself, for every worker after


if __name__ == "__main__":
    main()
