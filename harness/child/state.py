"""Process state taken before the candidate is imported, compared after import and around every request, and put
back: environment variables and library switches that steer torch/cuBLAS/cuDNN/Triton, the harness's own module
and class data (by value; code is watched by identity in guard.TamperWatch), and the threads and processes alive.

A change is reported (the parent rules it `tampering` or `background_work`) and undone, so the next call runs under
the judge's conditions again. The baselines are timed in another process altogether (gauntlet.judge.timing.bench), so
nothing here is what protects their times; this keeps the candidate's own calls honest and visible.
"""
from __future__ import annotations

import os
import sys
import threading

import torch

from . import guard
from .integrity import fingerprint, is_data, same

# Environment variables read by the libraries a call goes through: math modes, workspace and algorithm choices,
# library selection, preloads. Others (a cache directory, say) are the candidate's own business.
STEERING_ENV = ("CUBLAS", "CUBLASLT", "CUDNN", "CUDA_", "NVIDIA_TF32", "TORCH", "PYTORCH", "TRITON_INTERPRET",
                "LD_PRELOAD", "LD_LIBRARY_PATH", "OMP_", "MKL_", "OPENBLAS", "CUTE_DSL", "CUPY_TF32",
                "CUPY_ACCELERATORS")


def _flags() -> dict:
    """torch's global switches that change which kernel runs or in what precision."""
    b = torch.backends
    out = {"float32_matmul_precision": torch.get_float32_matmul_precision(),
           "deterministic": torch.are_deterministic_algorithms_enabled(),
           "cudnn.enabled": b.cudnn.enabled, "cudnn.benchmark": b.cudnn.benchmark,
           "cudnn.deterministic": b.cudnn.deterministic, "cudnn.allow_tf32": b.cudnn.allow_tf32,
           "num_threads": torch.get_num_threads()}
    if hasattr(b, "cuda"):
        m = b.cuda.matmul
        out.update({"cuda.matmul.allow_tf32": m.allow_tf32,
                    "cuda.matmul.allow_fp16_reduced": m.allow_fp16_reduced_precision_reduction,
                    "cuda.matmul.allow_bf16_reduced": m.allow_bf16_reduced_precision_reduction})
        for name in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled"):
            fn = getattr(b.cuda, name, None)
            if callable(fn):
                out[f"cuda.{name}"] = fn()
        try:
            out["cuda.preferred_blas_library"] = str(b.cuda.preferred_blas_library())
        except (AttributeError, RuntimeError, TypeError):
            pass
    return out


def _restore_flags(saved: dict) -> None:
    b = torch.backends
    torch.set_float32_matmul_precision(saved["float32_matmul_precision"])
    torch.use_deterministic_algorithms(saved["deterministic"])
    b.cudnn.enabled, b.cudnn.benchmark = saved["cudnn.enabled"], saved["cudnn.benchmark"]
    b.cudnn.deterministic, b.cudnn.allow_tf32 = saved["cudnn.deterministic"], saved["cudnn.allow_tf32"]
    torch.set_num_threads(saved["num_threads"])
    if "cuda.matmul.allow_tf32" in saved:
        m = b.cuda.matmul
        m.allow_tf32 = saved["cuda.matmul.allow_tf32"]
        m.allow_fp16_reduced_precision_reduction = saved["cuda.matmul.allow_fp16_reduced"]
        m.allow_bf16_reduced_precision_reduction = saved["cuda.matmul.allow_bf16_reduced"]
        for name in ("flash", "mem_efficient", "math", "cudnn"):
            key, setter = f"cuda.{name}_sdp_enabled", getattr(b.cuda, f"enable_{name}_sdp", None)
            if key in saved and callable(setter):
                setter(saved[key])
        if "cuda.preferred_blas_library" in saved:
            try:
                b.cuda.preferred_blas_library(saved["cuda.preferred_blas_library"].split(".")[-1].lower())
            except (AttributeError, RuntimeError, TypeError, ValueError):
                pass


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith(STEERING_ENV)}


# Harness data that changes during a call by design: the kernels the backends compiled (a solve that compiles
# lazily adds to it; gauntlet.child.provenance says why a forged entry is not caught here).
GROWS = frozenset({"gauntlet.child.provenance._NAMES"})


def _harness_data() -> dict:
    """Fingerprints (gauntlet.child.integrity) of the module globals and class attributes that are data (not code) in
    every harness, problem and baseline module imported, except GROWS: plain values by exact type and value, other
    objects by identity, so a global rebound to a look-alike (a `str` subclass that claims equality) is a change."""
    out = {}
    for name, mod in list(sys.modules.items()):
        if not (name.startswith("gauntlet.") or name.startswith("gauntlet_baseline_")
                or name.startswith("gauntlet_problem_")) or mod is None:
            continue
        for attr, value in list(vars(mod).items()):
            if attr.startswith("__"):
                continue
            if is_data(value):
                if f"{name}.{attr}" not in GROWS and _kept(value):
                    out[f"{name}.{attr}"] = fingerprint(value)
            elif isinstance(value, type) and getattr(value, "__module__", "") == name:
                for cattr, cvalue in list(vars(value).items()):
                    if not cattr.startswith("__") and is_data(cvalue) and _kept(cvalue):
                        out[f"{name}.{attr}.{cattr}"] = fingerprint(cvalue)
    return out


def _kept(value) -> bool:
    """Whether a data item is compared at all: values and containers of exact builtin types, not None and not other
    objects. A global that is None until the harness first needs it (a lazily made buffer, a cache) or an object the
    harness rebinds as it works would otherwise read as a change in the call that happened to set it, and an honest
    candidate would be `tampering` by chance; those objects' identity is the tamper watch's business where it matters.
    A kept value rebound to anything else (a look-alike subclass included) is no longer kept, and its absence from
    the new fingerprints is the change."""
    return value is not None and fingerprint(value)[0] != "object"


class Snapshot:
    """Taken once, before the candidate's module is imported."""

    def __init__(self):
        self.env = _env()
        self.flags = _flags()
        self.data = _harness_data()
        self.threads = guard.live_threads()

    def changes(self, restore: bool = True) -> list[str]:
        """What differs from the snapshot (env, switches, harness data), put back when `restore`."""
        out = []
        env = _env()
        for key in sorted(set(env) | set(self.env)):
            if not same(fingerprint(env.get(key)), fingerprint(self.env.get(key))):
                out.append(f"environment variable {key}")
                if restore:
                    if key in self.env:
                        os.environ[key] = self.env[key]
                    else:
                        os.environ.pop(key, None)
        flags = _flags()
        changed_flags = [k for k in self.flags if not same(fingerprint(flags.get(k)), fingerprint(self.flags[k]))]
        out += [f"torch switch {k} ({self.flags[k]!r} -> {flags.get(k)!r})" for k in changed_flags]
        if changed_flags and restore:
            _restore_flags(self.flags)
        data = _harness_data()
        # a name that went away (deleted, or rebound to code) is a change too
        out += [f"harness data {k}" for k in self.data if not same(data.get(k, ("missing",)), self.data[k])]
        return out

    def new_threads(self) -> list[str]:
        """Python threads alive now that were not before the import (started at import or left by a call)."""
        return [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in self.threads]
