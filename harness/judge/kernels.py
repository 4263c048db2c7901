"""Was the work the candidate's? Judged from what the profiler saw in each call (harness.child.profiling).

An allowlist, not a list of forbidden names. For a non-torch backend:
- on the GPU, every kernel that ran during a call, on any stream and thread, must be the candidate's own (a kernel
  its backend compiled: Triton, CuPy, CuTe) or one of torch's glue kernels (elementwise, copy, fill, reduction,
  indexing, concatenation, runtime memcpy/memset). A library kernel (cuBLAS, cuBLASLt, CUTLASS library, cuDNN,
  flash/mem-efficient attention, cuSPARSE, cuFFT, ...) or any other torch kernel (softmax, norms, im2col, ...) is
  `forbidden_op`, named. Every call must run at least one kernel of its own, and in timed calls its own kernels
  must take most of the kernel time (glue is glue, not the computation).
- on the CPU, every aten op run during the call, on any thread, must be on the allowlist below (ops run by
  Triton's interpreter inside one of the candidate's launches are the kernel's), and a Triton solution must
  launch at least one kernel of its own in every call.
A torch-backend candidate may run anything: it is judged on values and time alone.
"""
from __future__ import annotations

import re

# Kernels from vendor libraries and torch's fused library paths. Checked first: a kernel that matches is never
# the candidate's own, whatever it is called elsewhere.
LIBRARY_KERNEL = re.compile(
    r"nvjet|sm\d+_xmma|xmma_|cutlass_\d+_|cutlass::Kernel|cublas|gemv|gemmk1|gemmSN|splitKreduce|^Kernel2$|"
    r"ampere_\w*gemm|volta_\w*gemm|turing_\w*gemm|hopper_\w*gemm|s\d+gemm|[hsdi]gemm_|cudnn|flash_fwd|flash_bwd|"
    r"fmha|pytorch_flash|scaled_dot_product|mem_efficient|_scaled_mm|scaled_mm_kernel|cusparse|csrmm|spmm|"
    r"cutensor|regular_fft|vector_fft|fft_|cufft|cusolver|magma|nccl|curand|gemmkernel|GemmUniversal|"
    r"cutlass::gemm|cutlass::device_kernel", re.IGNORECASE)
# Where torch's own CUDA kernels live.
TORCH_KERNEL = re.compile(r"\bat::|\bc10::|at_cuda_detail|\bcub::|\bthrust::|^Memcpy|^Memset|CatArrayBatched")
# torch kernels allowed around a custom kernel: elementwise, copies, fills, reductions, indexing, concatenation.
TORCH_GLUE = re.compile(
    r"^Memcpy|^Memset|elementwise_kernel|vectorized_|unrolled_|reduce_kernel|Reduce|CatArrayBatched|copy|"
    r"fill|index|scatter|gather|arange|distribution|masked|where|compare|clamp|tensor_kernel_scan|cub::|"
    r"RadixSort|sort", re.IGNORECASE)
HOLD_KERNEL = "spin_kernel"

# aten ops a non-torch backend may run on the CPU: views, allocation, copies and casts, fills, elementwise math,
# reductions, indexing. A matrix product, convolution or attention op is not here, nor is anything else.
ALLOWED_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like full full_like new_zeros
new_ones new_full scalar_tensor lift_fresh detach detach_ alias view view_as reshape _reshape_alias _unsafe_view
as_strided t transpose transpose_ permute expand expand_as unsqueeze squeeze squeeze_ unsqueeze_ flatten unflatten
slice select narrow split split_with_sizes chunk unbind contiguous clone copy_ _copy_from _copy_from_and_resize
to _to_copy type_as resolve_conj resolve_neg conj _conj real imag set_ resize_ stride size numel item
_local_scalar_dense is_nonzero fill_ zero_ masked_fill masked_fill_ where add add_ sub sub_ rsub mul mul_ div
div_ neg neg_ abs abs_ maximum minimum max min amax amin clamp clamp_ clamp_min clamp_max clamp_min_ clamp_max_
sqrt rsqrt exp exp2 expm1 log log2 log1p pow pow_ square reciprocal sign sgn floor ceil round trunc frac
fmod remainder tanh sigmoid relu gelu erf erfc sin cos isnan isinf isfinite nan_to_num logical_and logical_or
logical_not logical_xor bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift
__and__ __or__ __xor__ __lshift__ __rshift__ eq ne lt le gt ge eq_ ne_ lt_ le_ gt_ ge_ sum mean prod cumsum
argmax argmin any all count_nonzero index index_select index_put index_put_ _index_put_impl_ gather scatter
scatter_ scatter_add scatter_add_ cat stack hstack vstack flip roll repeat repeat_interleave arange linspace
constant_pad_nd pad tril triu nonzero masked_select lerp addcmul addcdiv view_as_real view_as_complex
_has_compatible_shallow_copy_type record_stream is_pinned pin_memory _pin_memory
""".split())


def _op(name: str) -> str:
    return name.removeprefix("aten::").split(".")[0]


def own_kernel(name: str, declared: frozenset) -> bool:
    """A kernel the candidate's backend compiled: not a library's, not torch's; named in the candidate's module
    (Triton) when the parent knows names, else anything that is neither library nor torch (CuPy, CuTe)."""
    if LIBRARY_KERNEL.search(name) or TORCH_KERNEL.search(name):
        return name in declared and not TORCH_KERNEL.search(name) and not _library_only(name)
    return True


def _library_only(name: str) -> bool:
    """Library patterns that no declared name can excuse (vendor library symbols)."""
    return bool(re.search(r"nvjet|xmma|cublas|cudnn|cutlass_\d+_|cusparse|cufft|flash_fwd|fmha|Kernel2", name,
                          re.IGNORECASE))


def call_problems(call: dict, device: str, declared: frozenset, timed: bool, need_own: bool = True) -> list[str]:
    """Why this call's work was not the candidate's own; [] when it was."""
    if device == "cpu":
        bad = [op for op in call.get("ops", []) if _op(op) not in ALLOWED_OPS]
        out = [f"aten op(s) outside the allowlist ran: {', '.join(sorted(set(bad))[:6])}"] if bad else []
        if need_own and not call.get("launches"):
            out.append("no kernel of the candidate's own was launched in this call (Triton interpreter saw none)")
        return out
    own_us = glue_us = 0.0
    bad = []
    holds = 0
    for name, us in call.get("kernels", []):
        if HOLD_KERNEL in name and TORCH_KERNEL.search(name) and holds == 0:
            holds += 1                      # the harness's own stream hold, once per timed call
            continue
        if own_kernel(name, declared):
            own_us += us
        elif TORCH_KERNEL.search(name) and TORCH_GLUE.search(name) and not LIBRARY_KERNEL.search(name):
            glue_us += us
        else:
            bad.append(name)
    out = []
    if bad:
        out.append("kernel(s) that are neither the candidate's own nor torch glue ran: "
                   + ", ".join(sorted({b[:90] for b in bad})[:4]))
    if need_own and own_us == 0.0:
        out.append("no kernel of the candidate's own ran in this call (only torch glue: "
                   + (", ".join(sorted({n[:60] for n, _ in call.get("kernels", [])
                                        if HOLD_KERNEL not in n})[:3]) or "no kernels at all") + ")")
    elif timed and glue_us > own_us:
        out.append(f"torch glue kernels took {glue_us:.0f} us of the call's kernel time, the candidate's own "
                   f"{own_us:.0f} us: the computation is not in the candidate's kernels")
    return out


def summary(calls: list[dict]) -> list[str]:
    """Distinct kernel names across calls, for the record (what actually ran); on the CPU, the Triton
    interpreter's launches."""
    names = []
    for call in calls:
        seen = [name for name, _ in call.get("kernels", [])] + [f"{n} (interpreted)" for n in call.get("launches", [])]
        for name in seen:
            # Memcpy entries are left out: the worker's own copy of the output (guard.as_seen) is one.
            if HOLD_KERNEL not in name and not name.startswith("Memcpy") and name not in names:
                names.append(name)
    return names[:20]
