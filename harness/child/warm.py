"""Fill the judge's bytecode cache (gauntlet.judge.process.bytecode): import what a worker imports before it sees any
candidate (torch, the profiler's lazy imports, Triton, the harness), in a process of its own that runs no candidate
code, with PYTHONPYCACHEPREFIX pointing at the cache. Started by the judge by module name, as workers are."""
import importlib
import importlib.util
import os
import re
import sys
import sysconfig

# What a worker imports before any candidate code, besides the harness.
PACKAGES = ("torch", "triton", "triton.experimental.gluon", "numpy", "cupy", "cutlass", "hypothesis", "yaml")
# Compiled in parallel first (GAUNTLET_WARM_WORKERS > 1), whole: the imports below are one chain, one module at a time,
# and on a cold cache most of their time is compiling source (many seconds, while a `run`'s judges wait for it). These
# folders hold nearly all of what the chain imports; what they hold beyond it costs CPU the host has spare, not time.
# Test folders are left out.
PRECOMPILE = ("torch", "triton", "sympy", "mpmath", "numpy", "cupy", "cutlass", "hypothesis", "yaml", "jinja2",
              "gauntlet")
SKIP = re.compile(r"[\\/](tests?|idlelib|tkinter|turtledemo|ensurepip|lib2to3|site-packages|dist-packages)[\\/]")


def _sources() -> list[str]:
    """The .py files of PRECOMPILE's packages and of the standard library, test folders left out."""
    roots = [os.path.realpath(sysconfig.get_paths()["stdlib"])]
    for name in PRECOMPILE:
        try:
            spec = importlib.util.find_spec(name)          # a top-level package: found, not imported
        except (ImportError, ValueError):
            continue
        roots += [os.path.realpath(p) for p in (spec.submodule_search_locations or [])] if spec else []
    files = []
    for root in dict.fromkeys(roots):
        for folder, subdirs, names in os.walk(root):
            inner = folder[len(root):] + os.sep
            if SKIP.search(inner):
                subdirs[:] = []
                continue
            files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    return files


def precompile(workers: int) -> int:
    """Compile those files into the cache (PYTHONPYCACHEPREFIX) with `workers` processes; how many were compiled.
    py_compile writes each file atomically, so an import beside it never reads half a file."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    files = _sources()
    # Forked: this process has imported nothing heavy and started no thread yet.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        done = list(pool.map(_compile, files, chunksize=16))
    return sum(done)


def _compile(path: str) -> bool:
    import compileall
    return bool(compileall.compile_file(path, quiet=2))


def main() -> None:
    workers = int(os.environ.get("GAUNTLET_WARM_WORKERS", "1") or 1)
    if workers > 1 and sys.pycache_prefix:
        precompile(workers)
    for name in PACKAGES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional package that is absent or fails: nothing to cache
            pass
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]):     # its first session imports torch._dynamo and more
        torch.zeros(4).add_(1)
    from . import guard
    guard.import_harness()
    for name in ("gauntlet.child.worker", "gauntlet.child.timing", "gauntlet.child.profiling", "gauntlet.gpu"):
        importlib.import_module(name)
    from ..backends import triton_key
    triton_key.store(os.environ.get(triton_key.ENV))      # Triton's digest of itself, for every worker after


if __name__ == "__main__":
    main()
