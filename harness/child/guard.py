"""In-child checks around each candidate call: tampering, background work, aliasing, persisting L2, poisoning.

These run inside the candidate's own process, so a determined candidate can defeat them with enough effort (the
threat model in README says so); they raise the cost of cheating and catch the common tricks. What cannot be
forged is judged in the parent: values, shapes, the oracle.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import time
import types

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .integrity import same

_id, _type = id, type                       # bound at import: a later patch of builtins.id is not what compares
_FUNCTION_CODE = types.FunctionType.__code__.__get__     # a function's code, read past any __getattribute__

# --- tampering -------------------------------------------------------------------------------------------------

def _watched_objects():
    """(label, owner, attribute) triples whose identity must not change while candidate code runs."""
    import builtins
    watched = []
    groups = {
        "torch": (torch, ["allclose", "equal", "isclose", "matmul", "mm", "get_float32_matmul_precision",
                          "set_float32_matmul_precision", "empty", "frombuffer", "randn", "rand"]),
        "torch.Tensor": (torch.Tensor, ["__eq__", "clone", "cpu", "to", "contiguous", "numpy", "data_ptr",
                                        "view", "copy_", "untyped_storage", "reshape", "__torch_function__",
                                        "__torch_dispatch__", "detach", "numel", "element_size"]),
        "torch.testing": (torch.testing, ["assert_close"]),
        "torch.cuda": (torch.cuda, ["synchronize", "Event", "current_stream", "graph", "CUDAGraph"]),
        "torch.cuda.Event": (torch.cuda.Event, ["record", "elapsed_time", "synchronize", "query"]),
        "time": (time, ["perf_counter", "perf_counter_ns", "time", "monotonic", "sleep"]),
        "os": (os, ["write", "read", "_exit", "getpid"]),
        "builtins": (builtins, ["isinstance", "type", "id", "len", "print", "open"]),
        "threading": (threading, ["enumerate", "active_count"]),
        "TorchDispatchMode": (TorchDispatchMode, ["__enter__", "__exit__"]),
    }
    for label, (owner, names) in groups.items():
        watched += [(f"{label}.{n}", owner, n) for n in names if hasattr(owner, n)]
    # Whole namespaces the harness's own code paths go through (fill_/zero_ poison and flush, copy_ refills,
    # events, streams, the profiler that names kernels).
    from torch import profiler
    # Looked up on the class code actually uses (torch.Tensor), through its MRO: a patch that shadows a
    # TensorBase method (torch.Tensor.fill_ = ...) changes what torch.Tensor resolves to.
    for label, owner, names in (
            ("torch.Tensor", torch.Tensor, set(vars(torch.Tensor)) | set(vars(torch._C.TensorBase))),
            ("torch.cuda", torch.cuda, set(vars(torch.cuda))), ("torch.cuda.Stream", torch.cuda.Stream,
                                                               set(vars(torch.cuda.Stream))),
            ("torch.profiler", profiler, set(vars(profiler))),
            ("torch.profiler.profile", profiler.profile, set(vars(profiler.profile))),
            # what profile() runs through: a patched start/stop or event list would blind every call's check
            ("torch.profiler._KinetoProfile", profiler.profiler._KinetoProfile,
             set(vars(profiler.profiler._KinetoProfile))),
            ("torch.autograd.profiler", torch.autograd.profiler, set(vars(torch.autograd.profiler))),
            # the profiler the harness's CallProfiler runs (gauntlet.child.profiling), entered and left as a context
            ("torch.autograd.profiler.profile", torch.autograd.profiler.profile,
             set(vars(torch.autograd.profiler.profile)))):
        # Code only: module- and class-level state (torch.cuda._cached_device_count, ...) changes legitimately.
        watched += [(f"{label}.{n}", owner, n) for n in sorted(names)
                    if (not n.startswith("__") or n in ("__eq__", "__torch_function__", "__torch_dispatch__",
                                                        "__enter__", "__exit__"))
                    and _is_code(inspect.getattr_static(owner, n, None))]
    return watched


HARNESS_MODULES = ("backends", "discover", "formats", "gpu", "inputs", "problem", "protocol", "reasons",
                   "child.adapters", "child.guard", "child.integrity", "child.launches", "child.profiling",
                   "child.state", "child.timing", "child.worker")


def import_harness() -> None:
    """Import every harness module now, so the tamper watch covers the ones used later (timing, check...)."""
    import importlib
    for name in HARNESS_MODULES:
        importlib.import_module(f"gauntlet.{name}")


def _is_code(value) -> bool:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    return callable(value) or isinstance(value, property)


def _module_functions(prefix: str):
    """Module-level callables of matching modules, and the code of the classes they define (methods,
    properties): replacing Bench.batch leaves the class object itself the same."""
    out = []
    for name, mod in list(sys.modules.items()):
        if name.startswith(prefix) and isinstance(mod, types.ModuleType):
            for attr, value in list(vars(mod).items()):
                if callable(value):
                    out.append((f"{name}.{attr}", mod, attr))
                if isinstance(value, type) and value.__module__ == name:
                    out += [(f"{name}.{attr}.{m}", value, m) for m, v in list(vars(value).items())
                            if _is_code(v) and (not m.startswith("__") or m in ("__init__", "__call__"))]
    return out


class TamperWatch:
    """Remembers the identity (and, for functions, the code object) of what the harness relies on."""

    def __init__(self, extra_modules: tuple = ("gauntlet.", "gauntlet_problem_", "gauntlet_baseline_")):
        self.items = _watched_objects()
        for prefix in extra_modules:
            self.items += _module_functions(prefix)
            # The module objects themselves: replacing sys.modules["gauntlet.judge.values.check"] is tampering too.
            self.items += [(f"sys.modules[{name!r}]", sys.modules, name) for name in list(sys.modules)
                           if name.startswith(prefix)]
        self.snapshot = {label: self._fingerprint(owner, attr) for label, owner, attr in self.items}
        self.hooks = _hooks()

    @staticmethod
    def _fingerprint(owner, attr):
        """(id of the value, id of its code object or 0): identities only, read without running the value's own
        attribute lookup (a candidate object's __getattr__ could hand back the original function's code)."""
        value = dict.get(owner, attr) if _type(owner) is dict else static_lookup(owner, attr)
        inner = value.__func__ if _type(value) in (staticmethod, classmethod) else value
        code = _FUNCTION_CODE(inner) if _type(inner) is types.FunctionType else None
        return _id(value), _id(code) if code is not None else 0

    def changed(self) -> list[str]:
        # Compared as exact tuples of exact ints (integrity.same): nothing of the candidate's is asked whether it
        # equals its snapshot.
        out = [label for label, owner, attr in self.items
               if not same(self._fingerprint(owner, attr), self.snapshot[label])]
        if not same(_hooks(), self.hooks):
            out.append("sys.setprofile/settrace hook installed (it runs inside every timed call, baselines too)")
        return out


_MISSING = object()
_MRO = type.__dict__["__mro__"].__get__           # a class's own MRO and namespace, whatever its metaclass says
_NAMESPACE = type.__dict__["__dict__"].__get__


def static_lookup(owner, attr):
    """What `owner.attr` resolves to, without running it (static: a bound method is a new object per access), read
    straight from the namespaces: a plain module's own dict; for a class, a data descriptor of that name on its
    metaclass (which Python's lookup prefers, and inspect.getattr_static does not look for: a candidate setting
    one on a Python metaclass would change what the attribute returns unseen), else the first class of its MRO
    that has it. Anything else (a module whose class was swapped, an instance) goes to getattr_static. Every request
    checks the watch (about 1,100 names), and getattr_static for all of them costs several times what this does
    (docs/benchmarks.md)."""
    if type(owner) is types.ModuleType:
        return owner.__dict__.get(attr)
    if isinstance(owner, type):
        for k in _MRO(type(owner)):
            value = _NAMESPACE(k).get(attr, _MISSING)
            if value is not _MISSING:
                kind = type(value)
                if hasattr(kind, "__set__") or hasattr(kind, "__delete__"):
                    return value
                break
        for k in _MRO(owner):
            value = _NAMESPACE(k).get(attr, _MISSING)
            if value is not _MISSING:
                return value
    return inspect.getattr_static(owner, attr, None)


def _hooks() -> tuple:
    """The identities of the profile and trace hooks in force. By id: a hook object whose __eq__ says "equal" to
    None would otherwise pass for no hook at all."""
    return tuple(_id(h) for h in (sys.getprofile(), sys.gettrace(), threading.getprofile(), threading.gettrace()))


# --- background work -------------------------------------------------------------------------------------------

def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive()}


def child_processes() -> list[int]:
    pids = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as fh:
                pids += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    return pids


def background_work(threads_before: set[int]) -> str:
    new = [t for t in threading.enumerate() if t.is_alive() and t.ident not in threads_before]
    procs = child_processes()
    parts = []
    if new:
        parts.append(f"{len(new)} thread(s) still running after solve returned: "
                     + ", ".join(t.name for t in new[:5]))
    if procs:
        parts.append(f"child process(es) still running: {procs[:5]}")
    return "; ".join(parts)


# --- outputs and inputs ----------------------------------------------------------------------------------------

def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def aliased_input(out: torch.Tensor, inputs: tuple) -> str:
    if out.device.type == "meta" or out.untyped_storage().nbytes() == 0:
        return ""
    lo, hi = _storage_range(out)
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.device == out.device and x.untyped_storage().nbytes():
            xlo, xhi = _storage_range(x)
            if lo < xhi and xlo < hi:
                return f"#{i}"
    return ""


def as_seen(out):
    """A copy of a CUDA tensor output made on the current stream (a device-to-device memcpy for a dense one), for
    the worker to send instead of the output itself; anything else unchanged."""
    if isinstance(out, torch.Tensor) and out.is_cuda:
        return out.detach().clone()
    return out


def describe_output(out, inputs: tuple) -> dict:
    if type(out) is not torch.Tensor:   # noqa: E721 - subclasses (lazy or fake tensors) are rejected on purpose
        return {"is_tensor": False, "type": f"{type(out).__module__}.{type(out).__qualname__}"}
    return {"is_tensor": True, "dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape),
            "device": str(out.device), "device_type": out.device.type, "stride": list(out.stride()),
            "aliases_input": aliased_input(out, inputs)}


# --- GPU: persisting L2 ----------------------------------------------------------------------------------------

_CUDA_LIMIT_PERSISTING_L2 = 0x06   # cudaLimitPersistingL2CacheSize


@functools.lru_cache(maxsize=1)
def _cudart():
    """libcudart, found and loaded once: reset_persisting_l2 runs before every timed call."""
    import ctypes
    import ctypes.util
    import glob
    candidates = []
    for root in sys.path:
        candidates += sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "libcudart.so*")))
        candidates += sorted(glob.glob(os.path.join(root, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
    found = ctypes.util.find_library("cudart")
    candidates += [found] if found else []
    candidates += ["/usr/local/cuda/lib64/libcudart.so"]
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


_L2_BASELINE: list[int] = []


def remember_l2_baseline() -> None:
    """The carve-out in force before any candidate code ran (not always 0: a machine image may set one)."""
    if not _L2_BASELINE:
        _L2_BASELINE.append(persisting_l2_bytes())


def l2_changed() -> int:
    """The carve-out now, if the candidate changed it from the baseline; else 0."""
    now = persisting_l2_bytes()
    return now if _L2_BASELINE and now != _L2_BASELINE[0] else 0


def persisting_l2_bytes() -> int:
    """The persisting-L2 carve-out in force (0 normally). A carve-out keeps a kernel's inputs in L2 across the
    harness's flush, so timed calls would read warm data."""
    import ctypes
    lib = _cudart()
    if lib is None:
        return 0
    value = ctypes.c_size_t(0)
    if lib.cudaDeviceGetLimit(ctypes.byref(value), _CUDA_LIMIT_PERSISTING_L2) != 0:
        return 0
    return int(value.value)


def reset_persisting_l2() -> None:
    """Evict persisting lines and put the carve-out back to its baseline, before every timed call."""
    import ctypes
    lib = _cudart()
    if lib is not None:
        lib.cudaCtxResetPersistingL2Cache()
        lib.cudaDeviceSetLimit(_CUDA_LIMIT_PERSISTING_L2, ctypes.c_size_t(_L2_BASELINE[0] if _L2_BASELINE else 0))


def storage_ref(out):
    """A weak reference to the output's memory, taken before the harness lets go of the output."""
    from torch.multiprocessing.reductions import StorageWeakRef
    if type(out) is not torch.Tensor or out.untyped_storage().nbytes() == 0:   # noqa: E721
        return None
    return StorageWeakRef(out.untyped_storage())


def still_held(ref) -> bool:
    """After the harness dropped every reference of its own: is the output's memory still alive? Then the candidate
    holds it (a module-level buffer, a cache, a view of either), and a caller keeping two results would see the
    first overwritten."""
    if ref is None or ref.expired():
        return False
    import gc
    gc.collect()          # only when something still holds it: a reference cycle may be all that is left
    return not ref.expired()


def poison(out) -> None:
    """Overwrite a returned tensor before it is freed, so a later torch.empty that gets the same block from the
    caching allocator sees garbage, not an earlier answer (the 2025 'memory reuse' exploit)."""
    if type(out) is torch.Tensor and out.numel():   # noqa: E721
        try:
            out.fill_(float("nan") if out.is_floating_point() else -1)
        except RuntimeError:
            pass


# --- guard bands around the inputs ---------------------------------------------------------------------------

BAND_BYTES = 512     # a multiple of 256: the input's address keeps the alignment its allocation had


def banded(inputs: tuple) -> tuple[tuple, list]:
    """Each tensor input re-homed in the middle of a larger buffer whose ends are filled with 0xFF bytes (NaN in
    every float format, -1 in signed integers). A kernel that reads past either end of an input then reads poison
    rather than whatever the allocator put there: on the CPU that was often a zero, right by accident (an expert
    offset read at index -1, found by `gauntlet mutate`), on the GPU another tensor's data. Returns the inputs and
    the bands to check after the call (`bands_changed`): a write past an input's end is caught there. Values,
    shapes, strides and alignment are those of the original inputs; timed calls get the same inputs, so a
    candidate cannot tell the two apart by them."""
    out, bands = [], []
    for x in inputs:
        if type(x) is not torch.Tensor or x.numel() == 0 or x.layout != torch.strided:   # noqa: E721
            out.append(x)
            bands.append(None)
            continue
        item = x.element_size()
        band = BAND_BYTES // item
        span = x.untyped_storage().nbytes() // item
        flat = torch.empty(2 * band + span, dtype=x.dtype, device=x.device)
        flat.view(torch.uint8).fill_(0xFF)
        flat[band:band + span].copy_(x.as_strided((span,), (1,), 0))     # x's whole storage, in the middle
        out.append(flat.as_strided(x.shape, x.stride(), band + x.storage_offset()))
        bands.append((flat, band, span))
    return tuple(out), bands


def bands_changed(bands: list) -> list[int]:
    """Indices of the inputs whose guard bands no longer hold only 0xFF bytes."""
    changed = []
    for i, b in enumerate(bands):
        if b is None:
            continue
        flat, band, span = b
        raw = flat.view(torch.uint8)
        n = band * flat.element_size()
        if not (bool((raw[:n] == 0xFF).all()) and bool((raw[raw.numel() - n:] == 0xFF).all())):
            changed.append(i)
    return changed
