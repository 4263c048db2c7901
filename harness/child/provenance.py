"""Which GPU kernels the candidate's backends compiled in this worker: the names the profiler's kernels must carry to
count as the candidate's own (gauntlet.judge.process.kernels).

Why: without this record, any kernel name that is neither torch's nor a listed library's would count as the candidate's
own, so a CuPy or CuTe file could reach a library Gauntlet does not list (through ctypes, a prebuilt cubin, any .so) and
be timed as if it had written the kernel. So a kernel is the candidate's own only if one of the three compilers made it
here, from source, during this worker's life:
- CuPy: every module its compiler loads (RawModule, RawKernel, ElementwiseKernel: cupy.cuda.compiler, cache hits
  included) passes its image through here; a module loaded from a file (RawModule(path=...)) is not compiled and
  is not recorded;
- Triton: every kernel triton.compiler.compile returns (JIT launches, autotuning, cache hits);
- CuTe DSL: every function it compiles (cutlass.base_dsl.jit_executor.JitCompiledFunction: the kernel symbols its
  compiler emitted, and the cubin where kept) and every cubin its executor loads from Python
  (cutlass.base_dsl.runtime.cuda.load_library_data).
Names come from the compiled image itself (the ELF symbol table of a cubin, the `.entry` lines of PTX) or from
the compiler's own account of it (Triton's metadata, the CuTe DSL's kernel table), never from what the candidate
says. The hooks go in when each compiler module is first imported
(a post-import hook on sys.meta_path, installed before the backend's preload and the candidate's import), so a
candidate that imports a second backend is recorded too.

What this is and is not: it runs inside the candidate's process, so it raises the cost of a forgery (the candidate
would have to call into the harness's record with a library's kernel name, deliberately) rather than proving
provenance the way the OS-enforced confinement does. Undoing a hook fails closed: kernels compiled past it are not
recorded, so they are not the candidate's own. The judge reads the record in every call's profile ("compiled").
"""
from __future__ import annotations

import importlib.abc
import re
import struct
import sys

MAX_NAMES = 2000
_NAMES: dict = {}                 # name -> None, in the order compiled (a dict: ordered, no duplicates)
_ENTRY = re.compile(rb"\.entry\s+([A-Za-z_$][\w$.]*)")


def names() -> list[str]:
    """Every kernel name recorded so far, in the order compiled (at most MAX_NAMES)."""
    return list(_NAMES)


def _record(name) -> None:
    if isinstance(name, str) and name and len(_NAMES) < MAX_NAMES:
        _NAMES[name[:512]] = None


def record_image(image) -> None:
    """Record the kernels a compiled image defines: a cubin (ELF: its function symbols) or PTX (its entries)."""
    if isinstance(image, str):
        image = image.encode("utf-8", "replace")
    if not isinstance(image, (bytes, bytearray, memoryview)):
        return
    image = bytes(image)
    for name in (elf_functions(image) if image[:4] == b"\x7fELF" else
                 [m.decode("utf-8", "replace") for m in _ENTRY.findall(image)]):
        _record(name)


def elf_functions(image: bytes) -> list[str]:
    """Names of the function symbols (STT_FUNC) in a 64-bit little-endian ELF image (what NVRTC, ptxas and the
    CuTe DSL emit for a GPU); [] for anything else or a malformed image."""
    try:
        if image[4] != 2 or image[5] != 1:               # ELFCLASS64, little-endian
            return []
        shoff, = struct.unpack_from("<Q", image, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
        out = []
        for sh in sections:
            if sh[1] != 2:                               # SHT_SYMTAB
                continue
            _, _, _, _, off, size, link, _, _, entsize = sh
            strtab = sections[link]
            s_off, s_size = strtab[4], strtab[5]
            for i in range(min(size // max(entsize, 16), 200_000)):
                st_name, st_info = struct.unpack_from("<IB", image, off + i * max(entsize, 16))
                if st_info & 0xF != 2 or not st_name or st_name >= s_size:     # STT_FUNC
                    continue
                end = image.index(b"\0", s_off + st_name)
                out.append(image[s_off + st_name:end].decode("utf-8", "replace"))
        return out
    except (struct.error, IndexError, ValueError, OverflowError):
        return []


# -- the hooks, one per compiler module ----------------------------------------------------------------------------

def _hook_cupy(compiler) -> None:
    """cupy.cuda.compiler makes every module it compiles (or finds in its cache) with `function.Module()` and loads
    the image with `.load(image)`: the module's `function` is given a Module that records the image first."""
    real = compiler.function
    if getattr(real, "_gauntlet_recording", False):
        return

    class RecordingModule(real.Module):
        def load(self, cubin):
            record_image(cubin)
            return super().load(cubin)

    class Functions:
        _gauntlet_recording = True
        Module = RecordingModule

        def __getattr__(self, attr):
            return getattr(real, attr)

    compiler.function = Functions()


def _hook_triton(compiler_pkg) -> None:
    """JITFunction takes `compile` from triton.compiler when it first binds (jit.py, create_binder); so do the
    autotuner and a direct call. The kernel it returns carries its entry's name."""
    targets = [compiler_pkg]
    inner = sys.modules.get("triton.compiler.compiler")
    if inner is not None:
        targets.append(inner)
    for mod in targets:
        real = getattr(mod, "compile", None)
        if real is None or getattr(real, "_gauntlet_recording", False):
            continue

        def compile(*args, _real=real, **kwargs):
            kernel = _real(*args, **kwargs)
            _record(getattr(kernel, "name", None))
            asm = getattr(kernel, "asm", None)
            if isinstance(asm, dict) and isinstance(asm.get("cubin"), (bytes, bytearray)):
                record_image(asm["cubin"])
            return kernel
        compile._gauntlet_recording = True
        compile.__wrapped__ = real
        mod.compile = compile


def _hook_cute(cuda_helpers) -> None:
    """The CuTe DSL's JIT executor loads each compiled cubin through runtime.cuda.load_library_data (looked up on
    the module at call time)."""
    real = getattr(cuda_helpers, "load_library_data", None)
    if real is None or getattr(real, "_gauntlet_recording", False):
        return

    def load_library_data(cubin_data, *args, **kwargs):
        record_image(cubin_data)
        return real(cubin_data, *args, **kwargs)
    load_library_data._gauntlet_recording = True
    load_library_data.__wrapped__ = real
    cuda_helpers.load_library_data = load_library_data


def _hook_cute_compiled(jit_executor) -> None:
    """Every function the CuTe DSL compiles (or takes from its cache) becomes a JitCompiledFunction (subclasses
    included) holding the kernels its compiler emitted: their symbols (kernel_info) and, where kept, the cubin. The
    default CUDA path loads that cubin from the compiled host code, past load_library_data, so it is read here."""
    cls = getattr(jit_executor, "JitCompiledFunction", None)
    real = getattr(cls, "__init__", None)
    if real is None or getattr(real, "_gauntlet_recording", False):
        return

    def __init__(self, *args, **kwargs):
        real(self, *args, **kwargs)
        for name in list(getattr(self, "kernel_info", None) or ()):
            _record(name)
        artifacts = getattr(self, "artifacts", None)
        record_image(getattr(artifacts, "CUBIN", None))
    __init__._gauntlet_recording = True
    __init__.__wrapped__ = real
    cls.__init__ = __init__


HOOKS = {"cupy.cuda.compiler": _hook_cupy, "triton.compiler": _hook_triton,
         "cutlass.base_dsl.runtime.cuda": _hook_cute, "cutlass.base_dsl.jit_executor": _hook_cute_compiled}


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, hook):
        self.loader, self.hook = loader, hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.hook(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a hooked module it asks the other finders and wraps the loader they give."""

    def find_spec(self, name, path, target=None):
        if name not in HOOKS:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, HOOKS[name])
        return spec


def install() -> None:
    """Hook the compilers already imported, and the others as they are imported. Called once per worker, before
    the backend's preload and the candidate's import (gauntlet.child.worker, Session.prepare)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name, hook in HOOKS.items():
        if name in sys.modules:
            hook(sys.modules[name])
