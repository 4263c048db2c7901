"""Fixes that make Triton's CPU interpreter (TRITON_INTERPRET=1), which the harness uses to run Triton solutions on a
machine without a GPU, compute what the GPU computes: bfloat16 products, float conversions (fp8 included) and
`@triton.autotune`. Checked against Triton 3.6.0 (`CHECKED_TRITON`); `unsupported_internals()` lists what differs in
another version, and the tests fail on it rather than let the interpreter's own behaviour come back silently.

Why this exists. numpy has no bfloat16 or fp8, so the interpreter (triton/runtime/interpreter.py) keeps those
values as raw bit patterns in np.uint16 / np.uint8 arrays (`_get_np_dtype`). Loads and stores just move the bits,
so they are right. Several places forget that the array is not a number, or round differently from the GPU:

1. `InterpreterBuilder.create_dot` only decodes 8-bit float operands. For bf16 it runs
   `np.matmul(a_bits, b_bits, dtype=float32)`, i.e. it multiplies the *integers* 0..65535 that the bit patterns
   spell (1.0 is 0x3F80 = 16256). The result is off by ~1e10 on unit-sized data: garbage, not an accuracy issue.
   Its fp8 decoding (`_convert_float` to fp16) reads e5m2 subnormals as 0 and the e4m3fn NaN as 480.
   fp16 (a real numpy dtype) and fp32 are right; the interpreter ignores `input_precision` and always does the
   fp32 matmul exactly as numpy/BLAS does, so "tf32" there is simply full fp32 (more accurate than a GPU).
2. `InterpreterBuilder.cast_impl`, which serves `x.to(tl.bfloat16)` from fp32 (`create_fp_trunc`), calls
   `_convert_float(..., rounding_mode=None)`, which *truncates* the mantissa (round toward zero) where the GPU
   (and torch) round to nearest even: up to 1 bf16 ulp of error instead of 1/2, biased toward zero, enough to look
   like a precision bug in the candidate. bf16 -> fp32 through the same function mis-normalizes bf16 subnormals
   (9.2e-41 comes back 0), and casts between bf16 and fp64 or integers run `astype` on the bits: garbage.
3. `InterpreterBuilder.create_fp_to_fp`, which serves every cast to or from fp8 and every cast with
   `fp_downcast_rounding="rtz"`, rounds ties up, loses carries into the next binade, mangles subnormals and
   out-of-range values (gauntlet.backends.triton_casts has the details and the GPU's rules).
4. `triton.autotune` benchmarks through the GPU driver, which the interpreter does not have: every autotuned kernel
   crashed (gauntlet.backends.triton_autotune).

What the patch does: `create_dot` decodes bf16 (a 16-bit shift: bf16 is the top half of an fp32) and fp8 (exactly,
through torch) to fp32 and runs the fp32 matmul, which accumulates in fp32 as the GPU does. `cast_impl` and
`create_fp_to_fp` convert floats as the GPU does (triton_casts.convert: torch's correctly rounded casts, plus the
GPU's saturation and round-toward-zero rules), and refuse the conversions Triton cannot compile for the GPU. The
Autotuner runs one config by a fixed rule, and each launch is marked for the profiler with the kernel's name and,
under autotune, the config that ran.

Not fixed, so a kernel tested under the interpreter should avoid them: arithmetic *in* bf16 (bf16 + bf16 stays
bf16 in Triton's type rules, and the interpreter adds the uint16 bits), and bf16 math functions. Do arithmetic in
fp32 and cast at the end, which is what kernels do on GPUs anyway. int -> bf16 goes through fp32 and so can round
twice for |int| > 2**24. The GPU's fp8 tensor-core products accumulate with fewer bits than fp32 (Hopper); the
interpreter accumulates in fp32, so it is more accurate there, never less.
"""
import inspect
import os
import warnings

import numpy as np

from . import triton_autotune, triton_casts

CHECKED_TRITON = "3.6.0"       # the interpreter and autotuner these patches were written against and tested on
_F32_EXACT = (np.dtype(np.float16), np.dtype(np.float32))   # widen to fp32 without rounding
_MARK = "_gauntlet_interpreter_patch"  # attribute on InterpreterBuilder: the originals, so patching twice is a no-op
_BUILDER_METHODS = {          # what the patch replaces, with the signature it was written for
    "create_dot": ["self", "a", "b", "d", "input_precision", "max_num_imprecise_acc"],
    "cast_impl": ["self", "src", "dst_type"],
    "create_fp_to_fp": ["self", "src", "dst_type", "rounding_mode"],
}


def interpreter_in_use():
    """True when Triton will run kernels in its interpreter. Read from the environment (what triton.knobs reads)
    so that asking does not import triton."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def unsupported_internals() -> list[str]:
    """What in the installed Triton differs from what these patches rely on ([] when nothing does). A different
    version is listed too, even when everything else matches: its interpreter has not been checked against the
    GPU's numerics. Imports triton."""
    import triton
    from triton.runtime import autotuner
    version = [] if triton.__version__ == CHECKED_TRITON else [
        f"Triton {triton.__version__} is installed; the interpreter patches were checked against {CHECKED_TRITON}"]
    return version + _builder_problems() + triton_autotune.unsupported_internals(autotuner.Autotuner)


def _builder_problems() -> list[str]:
    import triton.language as tl
    from triton.runtime import interpreter as interp
    problems = []
    builder = getattr(interp, "InterpreterBuilder", None)
    for name, params in _BUILDER_METHODS.items():
        fn = getattr(builder, name, None)
        if fn is None or list(inspect.signature(fn).parameters) != params:
            problems.append(f"InterpreterBuilder.{name} is missing or its signature changed")
    storage = getattr(interp, "_get_np_dtype", None)
    if storage is None or getattr(interp, "TensorHandle", None) is None:
        problems.append("interpreter._get_np_dtype / TensorHandle are missing")
    elif (storage(tl.bfloat16), storage(tl.float8e4nv), storage(tl.float8e5)) != (
            np.dtype(np.uint16), np.dtype(np.uint8), np.dtype(np.uint8)):
        problems.append("the interpreter no longer stores bf16 / fp8 as uint16 / uint8 bit patterns")
    return problems


def _bf16_bits_to_f32(bits):
    # A bf16 is exactly the high 16 bits of the fp32 with the same value: no rounding, subnormals/inf/NaN kept.
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def _rounding_name(mode):
    """Triton's ir.ROUNDING_MODE (or None) -> "rtne" / "rtz" / None, the spelling of fp_downcast_rounding."""
    return None if mode is None else mode.name.lower()


def patch_interpreter():
    """Patch the interpreter's dot, float casts and the autotuner (see the module docstring). Returns True if all
    the patches are in place after the call, False when the interpreter is not in use (nothing is imported or
    changed) or when this Triton's internals are not the ones a patch was written for (that patch is skipped, with
    a warning saying what differs; the others still go in). Idempotent."""
    if not interpreter_in_use():
        return False
    try:
        import triton.language as tl
        from triton.runtime import interpreter as interp
    except ImportError:
        return False
    tuned = triton_autotune.patch_autotuner()         # warns on its own when this Triton's Autotuner differs
    builder_cls = getattr(interp, "InterpreterBuilder", None)
    if builder_cls is not None and _MARK in builder_cls.__dict__:
        return tuned
    problems = _builder_problems()
    if problems:
        warnings.warn("triton_interpreter.patch_interpreter: the interpreter's dot and float casts are not patched "
                      "(they compute as Triton's own interpreter does); this Triton differs: " + "; ".join(problems))
        return False

    originals = {name: builder_cls.__dict__[name] for name in _BUILDER_METHODS}
    handle_cls, bf16, fp32 = interp.TensorHandle, tl.bfloat16, tl.float32

    def as_f32(h):
        if h.dtype == bf16:
            return handle_cls(_bf16_bits_to_f32(h.data), fp32)
        if h.dtype.name in triton_casts.FP8:
            return handle_cls(triton_casts.convert(h.data, h.dtype.name, "fp32", "exact"), fp32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        # bf16 and fp8 operands are decoded to fp32 exactly first; the accumulator (d) is fp32 for them unless the
        # kernel asked for an fp16 out_dtype, which the original handles.
        a, b = as_f32(a), as_f32(b)
        if d.data.dtype == np.float32 and a.data.dtype in _F32_EXACT and b.data.dtype in _F32_EXACT:
            # Same math as the original (operands widened exactly to fp32, fp32 accumulation), but the original's
            # np.matmul(..., dtype=float32) skips BLAS and is ~300x slower, which would dominate the CPU tests' time.
            prod = np.matmul(a.data.astype(np.float32, copy=False), b.data.astype(np.float32, copy=False))
            return handle_cls(prod + d.data, d.dtype.scalar)
        return originals["create_dot"](self, a, b, d, input_precision, max_num_imprecise_acc)

    def cast_impl(self, src, dst_type):
        # fp trunc/ext, int <-> float. Only casts that involve bf16 need help: numpy does the rest as the GPU does.
        src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
        if src_ty == dst_ty or (src_ty != bf16 and dst_ty != bf16):
            return originals["cast_impl"](self, src, dst_type)
        if triton_casts.handles(src_ty.name, dst_ty.name):                      # bf16 <-> fp16/fp32/fp64
            return handle_cls(triton_casts.convert(src.data, src_ty.name, dst_ty.name, "rtne"), dst_ty)
        data = _bf16_bits_to_f32(src.data) if src_ty == bf16 else src.data.astype(np.float32)   # integers
        if dst_ty == bf16:
            return handle_cls(triton_casts.convert(data, "fp32", "bf16", "rtne"), bf16)
        return handle_cls(data.astype(interp._get_np_dtype(dst_ty)), dst_ty)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        # Every cast to or from fp8, and every downcast with fp_downcast_rounding="rtz".
        src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
        if not triton_casts.handles(src_ty.name, dst_ty.name):      # fp8e4b15 & co: not NVIDIA sm_90 formats
            return originals["create_fp_to_fp"](self, src, dst_type, rounding_mode)
        mode = triton_casts.fp_to_fp_rule(src_ty.name, dst_ty.name, _rounding_name(rounding_mode))
        return handle_cls(triton_casts.convert(src.data, src_ty.name, dst_ty.name, mode), dst_ty)

    builder_cls.create_dot = create_dot
    builder_cls.cast_impl = cast_impl
    builder_cls.create_fp_to_fp = create_fp_to_fp
    # create_fp_trunc & co. are lambdas that look up self.cast_impl at call time, so they pick up the new one.
    setattr(builder_cls, _MARK, originals)
    return tuned


LAUNCH_PREFIX = "gauntlet::launch::"


def mark_launches(launch_name=None) -> bool:
    """Wrap each interpreted kernel launch in a profiler range named after the kernel (and, for an autotuned
    kernel, the config that ran), so the harness's profiler (gauntlet.child.profiling) sees the candidate's own
    launches on the CPU, on any thread, and the record says which config ran. `launch_name(label)` gives the
    range's name (the worker's: a per-call nonce and a launch number, recorded, gauntlet.child.launches); by
    default LAUNCH_PREFIX + label. Idempotent: the first call's naming stays."""
    if not interpreter_in_use():
        return False
    try:
        from torch.profiler import record_function
        from triton.runtime import interpreter as interp
    except ImportError:
        return False
    executor = getattr(interp, "GridExecutor", None)
    if executor is None or "_gauntlet_marked" in executor.__dict__:
        return executor is not None
    original = executor.__call__
    named = launch_name or (lambda label: LAUNCH_PREFIX + label)

    def __call__(self, *args, **kwargs):
        name = getattr(getattr(self, "fn", None), "__name__", "kernel")
        note = triton_autotune.launch_note(kwargs)
        with record_function(named(name + (f" [{note}]" if note else ""))):
            return original(self, *args, **kwargs)

    executor.__call__ = __call__
    executor._gauntlet_marked = original
    return True


def unpatch_interpreter():
    """Put the interpreter's and the autotuner's original methods back (for tests that show the bugs). Returns True
    if it undid a patch."""
    if not interpreter_in_use():
        return False
    try:
        from triton.runtime import interpreter as interp
    except ImportError:
        return False
    undone = triton_autotune.unpatch_autotuner()
    builder_cls = interp.InterpreterBuilder
    originals = builder_cls.__dict__.get(_MARK)
    if originals is None:
        return undone
    for name, fn in originals.items():
        setattr(builder_cls, name, fn)
    delattr(builder_cls, _MARK)
    return True
