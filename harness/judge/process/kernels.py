"""Was the work the candidate's? Judged from what the profiler saw in each call (gauntlet.child.profiling).

An allowlist, not a list of forbidden names. For a non-torch backend:
- on the GPU, every kernel that ran during a call, on any stream and thread, must be the candidate's own (a kernel
  its backend compiled in its worker: Triton, CuPy, CuTe, as the worker's record says, gauntlet.child.provenance; a
  kernel of any other name, an unlisted library's or a prebuilt cubin's, is not) or one of torch's glue kernels
  (GLUE_FAMILIES: copies, fills, elementwise math, reductions, indexing, scans, sorting and selection, searching and
  counting). A library kernel (cuBLAS, cuBLASLt,
  CUTLASS library, cuDNN, flash/mem-efficient attention, cuSPARSE, cuFFT, ...) or any other torch kernel (softmax,
  norms, im2col, ...) is `forbidden_op`, named. Every call must run at least one kernel of its own, and in timed calls
  its own kernels must take most of the kernel time (glue is glue, not the computation).
- on the CPU, every aten op run during the call, on any thread, must be in one of the same families (inside the
  Triton interpreter's launch ranges too: the interpreter itself runs only allocation, copies and casts), and a
  Triton solution must launch at least one kernel of its own in every call: a launch range the harness opened under
  the judge's nonce for the call (gauntlet.child.launches); a range named like one that it did not open is
  `forbidden_op`.
A torch-backend candidate may run anything: it is judged on values and time alone.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

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


@dataclass(frozen=True)
class GlueFamily:
    """One family of torch glue a non-torch backend may run around its own kernels, with its meaning on each
    device: the aten ops that make it on the CPU (nested ops included: what the profiler records), and the name
    patterns of the torch CUDA kernels it launches on the GPU (None: it launches none: views, allocation).
    `kernels_seen` are kernel names of the family as the profiler shows them (function names and namespaces from
    torch's CUDA sources, template arguments shortened), for the test that the two meanings agree
    (tests/test_allowlist.py)."""
    ops: str
    gpu: str | None
    kernels_seen: tuple = ()


# The one allowlist: ALLOWED_OPS (CPU) and TORCH_GLUE (GPU) are both derived from it, so a family allowed on one
# device is allowed on the other. Routing glue (diff, sort/argsort, bincount, searchsorted, topk, cumsum, histc,
# unique, ...) is glue on both: with two lists, one device's can lack what the other's takes, and an honest MoE
# kernel whose routing uses torch.diff would be `forbidden_op` on that device only. No family holds a
# matrix product, convolution, attention, softmax or norm (nor any op not named here): those stay forbidden on
# both devices. Random numbers are not glue on either (torch's CUDA distribution kernels carry curand in their
# names, which the library patterns refuse).
GLUE_FAMILIES = {
    "allocation and views": GlueFamily(
        """empty empty_like empty_strided new_empty new_empty_strided lift_fresh lift_fresh_copy detach detach_ alias
        view view_as reshape _reshape_alias _unsafe_view as_strided as_strided_ t transpose transpose_ permute
        expand expand_as broadcast_to unsqueeze squeeze squeeze_ unsqueeze_ flatten unflatten movedim moveaxis
        swapaxes slice select narrow split split_with_sizes chunk unbind resolve_conj resolve_neg conj _conj real
        imag set_ resize_ stride size numel _has_compatible_shallow_copy_type record_stream is_pinned
        view_as_real view_as_complex""", None),
    "copies and casts": GlueFamily(
        """contiguous clone copy_ _copy_from _copy_from_and_resize to _to_copy type_as pin_memory _pin_memory item
        _local_scalar_dense is_nonzero""",
        r"^Memcpy|copy",
        ("Memcpy DtoD (Device -> Device)", "void at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)")),
    "fills and factories": GlueFamily(
        """zeros zeros_like ones ones_like full full_like new_zeros new_ones new_full scalar_tensor fill_ zero_
        arange linspace tril triu""",
        r"^Memset|fill|arange|linspace|elementwise_kernel_with_index|triu_tril",
        ("Memset (Device)", "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
         "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
         "void at::native::triu_tril_kernel<float, int, false, 4, true>(at::cuda::detail::TensorInfo<float, int>)")),
    "elementwise math": GlueFamily(
        """masked_fill masked_fill_ where add add_ sub sub_ rsub mul mul_ div div_ floor_divide neg neg_ abs abs_
        maximum minimum clamp clamp_ clamp_min clamp_max clamp_min_ clamp_max_ sqrt rsqrt exp exp2 expm1 log log2
        log1p pow pow_ square reciprocal sign sgn floor ceil round trunc frac fmod remainder tanh sigmoid relu
        gelu erf erfc sin cos isnan isinf isfinite nan_to_num logical_and logical_or logical_not logical_xor
        bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift __and__ __or__
        __xor__ __lshift__ __rshift__ eq ne lt le gt ge eq_ ne_ lt_ le_ gt_ ge_ lerp addcmul addcdiv diff""",
        r"elementwise_kernel|vectorized_|unrolled_|where|compare|clamp",
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<int>, std::array<char*, "
         "3ul> >(int, at::native::CUDAFunctor_add<int>, std::array<char*, 3ul>)",
         "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>()")),
    "reductions": GlueFamily(
        "sum mean prod amax amin aminmax max min argmax argmin any all count_nonzero",
        r"reduce_kernel|Reduce",
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
         "at::native::sum_functor<float, float, float>::operator()>, unsigned int, float, 4> >()",
         "void at_cuda_detail::cub::DeviceReduceSingleTileKernel<at_cuda_detail::cub::DeviceReducePolicy>()")),
    "indexing, gather, scatter, concatenation": GlueFamily(
        """index index_select index_put index_put_ _index_put_impl_ gather scatter scatter_ scatter_add
        scatter_add_ scatter_reduce scatter_reduce_ index_add index_add_ index_copy index_copy_ take take_along_dim
        masked_select masked_scatter masked_scatter_ nonzero argwhere one_hot flip roll repeat repeat_interleave
        cat stack hstack vstack constant_pad_nd pad""",
        r"index|scatter|gather|masked|CatArrayBatched|flip|roll|write_indices|flag_kernel|nonzero|take_kernel|"
        r"compute_cuda_kernel",
        ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel()>(long, "
         "at::native::gpu_index_kernel())",
         "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>()",
         "void at::native::_scatter_gather_elementwise_kernel<128, 8, at::native::_cuda_scatter_gather_internal_"
         "kernel<true, float>::operator()()>(int, at::native::_cuda_scatter_gather_internal_kernel<true, float>())",
         "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType"
         "<4u>, unsigned int, 1, 128, 1>()",
         "void at::native::flag_kernel<512, 16, int>(int const*, long*, long, long, int)",
         "void at::native::write_indices<long>(long*, at::cuda::detail::TensorInfo<long, int>, int, long)")),
    "scans": GlueFamily(
        "cumsum cumsum_ cumprod cumprod_ cummax cummin _cummax_helper _cummin_helper",
        r"tensor_kernel_scan|DeviceScan",
        ("void at::native::tensor_kernel_scan_innermost_dim<float, std::plus<float> >(float*, float const*, "
         "unsigned int, unsigned int, unsigned int, float, std::plus<float>)",
         "void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::DeviceScanPolicy<long>::Policy900>()",
         "void at::native::tensor_kernel_scan_innermost_dim_with_indices<float, std::greater_equal<float> >()")),
    "sorting and selection": GlueFamily(
        "sort argsort msort topk kthvalue unique _unique _unique2 unique_consecutive unique_dim",
        r"sort|RadixSort|topk|KthValue|unique|adjacent_difference|DeviceSelect|cub::|thrust::",
        ("void at::native::bitonicSortKVInPlace<2, -1, 16, 16, float, long, at::native::LTOp<float, true>, "
         "unsigned int>()",
         "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub::DeviceRadixSortPolicy<long, "
         "long, unsigned long long>::Policy900, false, long, long, unsigned long long, int, int>()",
         "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, true>()",
         "void at::native::mbtopk::radixFindKthValues<float, unsigned int, unsigned int, 2>()",
         "void at::native::(anonymous namespace)::gatherKthValue<float, unsigned int, 2>()",
         "void at::native::(anonymous namespace)::adjacent_difference_kernel<long>(long, long const*, int*)",
         "void at_cuda_detail::cub::DeviceSelectSweepKernel<at_cuda_detail::cub::DispatchSelectIf<long*>::Policy>()")),
    "searching and counting": GlueFamily(
        "searchsorted bucketize bincount histc isin",
        r"searchsorted|bucketize|Histogram|isin",
        ("void at::native::searchsorted_cuda_kernel<long, long>(long*, long const*, long const*, long const*, long, "
         "long, long, long, bool)",
         "void at::cuda::kernelHistogram1D<long, long, long, 1, 2, -1, (at::cuda::CUDAHistogramMemoryType)0, "
         "at::cuda::(anonymous namespace)::CUDA_tensor_histogram<long, long, false>()>()")),
}

ALLOWED_OPS = frozenset(op for family in GLUE_FAMILIES.values() for op in family.ops.split())
# torch kernels allowed around a custom kernel (a torch kernel, not a library's: call_problems checks that too).
TORCH_GLUE = re.compile("|".join(f.gpu for f in GLUE_FAMILIES.values() if f.gpu), re.IGNORECASE)
# The harness's own kernels (gauntlet.gpu), each at most once per call: the prime and the hold before the start
# event, the begin and end markers, the output's snapshot. A second one of a kind is not the harness's
# (gauntlet.judge.timing.window too).
HOLD_KERNEL = "gauntlet_hold"
HARNESS_KERNELS = {"gauntlet_prime": "prime", "gauntlet_hold": "hold", "gauntlet_begin": "begin",
                   "gauntlet_mark": "mark", "gauntlet_snap": "snap", "gauntlet_snap_bytes": "snap"}


def _op(name: str) -> str:
    return name.removeprefix("aten::").split(".")[0]


def own_kernel(name: str, declared: frozenset, compiled: frozenset = frozenset()) -> bool:
    """A kernel the candidate's backend compiled in its worker (`compiled`: compiled_names of what its compilers
    recorded, gauntlet.child.provenance) and that is neither a library's nor torch's. A library-looking
    name passes only when the candidate's module declares it (Triton: a kernel called `sgemm_kernel`) and it was
    compiled; names no declaration excuses (_library_only) never pass. A name nothing compiled (an unlisted
    library's, a prebuilt cubin's) is not the candidate's own, whatever it is called."""
    if name not in compiled and base_name(name) not in compiled:
        return False
    if LIBRARY_KERNEL.search(name) or TORCH_KERNEL.search(name):
        if _cute_candidate_name(name):
            return not _library_only(name)
        return name_declared(name, declared) and not TORCH_KERNEL.search(name) and not _library_only(name)
    return True


# The CuTe DSL names a kernel after the Python it compiled: kernel_cutlass_<method>_<module>_<class>_object_at_...
# A kernel it compiled in the worker from the candidate's module (loaded as `gauntlet_candidate`) carries the
# candidate's own class names, and those look like libraries' often enough (a class `WsGemm` gives `...sGemm_...`,
# `GroupedGemm` `...dGemm_...`, cuBLAS's sgemm_/dgemm_ pattern): such a name is declared by its module. Vendor
# symbols (_library_only) stay refused in it.
_CUTE_CANDIDATE = re.compile(r"^kernel_cutlass_\w*?_gauntlet_candidate_[A-Za-z_]")


def _cute_candidate_name(name: str) -> bool:
    return bool(_CUTE_CANDIDATE.match(name))


def compiled_names(recorded) -> frozenset:
    """The names a worker recorded, with each one's base_name: a profiler name matches either."""
    names = frozenset(n for n in recorded if isinstance(n, str))
    return names | {base_name(n) for n in names}


def name_declared(name: str, declared: frozenset) -> bool:
    return name in declared or base_name(name) in declared


@functools.lru_cache(maxsize=4096)
def base_name(name: str) -> str:
    """The unqualified function name of a kernel, from the profiler's demangled form (`void ns::gemm<128>(float*,
    int)` -> `gemm`) or a symbol's mangled one (`_ZN2ns4gemmILi128EEEvPfi` -> `gemm`); a plain C name is itself.
    Cached: every timed call's profile carries the worker's whole record, so the same names recur call after call."""
    if name.startswith("_Z"):
        return _mangled_base(name) or name
    text = name.replace("(anonymous namespace)", "anon")
    depth, head = 0, []
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            head.append(ch)
    words = "".join(head).split()
    return words[-1].split("::")[-1] if words else name


def _mangled_base(symbol: str) -> str:
    """The last source name of an Itanium-mangled function's (possibly nested) name, skipping template
    arguments; "" where the form is not one this reads (the caller then compares the whole symbol)."""
    i, last = 2, ""
    if symbol[i:i + 1] == "L":
        i += 1
    nested = symbol[i:i + 1] == "N"
    i += nested
    while i < len(symbol):
        while nested and symbol[i:i + 1] in ("r", "V", "K", "R", "O"):
            i += 1
        ch = symbol[i:i + 1]
        if ch.isdigit():
            j = i
            while symbol[j:j + 1].isdigit():
                j += 1
            n = int(symbol[i:j])
            last, i = symbol[j:j + n], j + n
        elif ch == "I":                 # template arguments: skip to the matching E
            depth, i = 1, i + 1
            while i < len(symbol) and depth:
                c = symbol[i]
                if c.isdigit():
                    j = i
                    while symbol[j:j + 1].isdigit():
                        j += 1
                    i = j + int(symbol[i:j])
                    continue
                depth += c in "INLX"
                depth -= c == "E"
                i += 1
        elif ch == "S" and nested:      # a substitution (St, S_, S0_): a prefix already named
            i = symbol.index("_", i) + 1 if symbol[i + 1:i + 2] != "t" else i + 2
        else:
            break
        if not nested:
            break
    return last


def _library_only(name: str) -> bool:
    """Library patterns that no declared name can excuse (vendor library symbols)."""
    return bool(re.search(r"nvjet|xmma|cublas|cudnn|cutlass_\d+_|cusparse|cufft|flash_fwd|fmha|Kernel2", name,
                          re.IGNORECASE))


def call_problems(call: dict, device: str, declared: frozenset, timed: bool, need_own: bool = True) -> list[str]:
    """Why this call's work was not the candidate's own; [] when it was."""
    if device == "cpu":
        bad = [op for op in call.get("ops", []) if _op(op) not in ALLOWED_OPS]
        out = [f"aten op(s) outside the allowlist ran: {', '.join(sorted(set(bad))[:6])}"] if bad else []
        if call.get("forged_launches"):          # gauntlet.child.launches: ranges the harness did not open
            out.append("profiler range(s) named like the harness's launch mark that the harness did not open: "
                       + ", ".join(sorted(set(call["forged_launches"]))[:3]))
        if need_own and not call.get("launches"):
            out.append("no kernel of the candidate's own was launched in this call (Triton interpreter saw none)")
        return out
    own_us = glue_us = 0.0
    compiled = compiled_names(call.get("compiled", []))
    bad, unknown = [], []
    harness: set = set()
    for name, us in call.get("kernels", []):
        if name in HARNESS_KERNELS:
            if HARNESS_KERNELS[name] not in harness:
                harness.add(HARNESS_KERNELS[name])  # the harness's own hold, marker or snapshot, once each
            else:
                bad.append(name)                    # a second one is not the harness's
            continue
        if own_kernel(name, declared, compiled):
            own_us += us
        elif TORCH_KERNEL.search(name) and TORCH_GLUE.search(name) and not LIBRARY_KERNEL.search(name):
            glue_us += us
        elif LIBRARY_KERNEL.search(name) or TORCH_KERNEL.search(name):
            bad.append(name)
        else:
            unknown.append(name)
    out = []
    if bad:
        out.append("kernel(s) that are neither the candidate's own nor torch glue ran: "
                   + ", ".join(sorted({b[:90] for b in bad})[:4]))
    if unknown:
        out.append("kernel(s) that no backend compiled in the candidate's worker ran (an unlisted library's, or a "
                   "prebuilt binary's): " + ", ".join(sorted({b[:90] for b in unknown})[:4]))
    if need_own and own_us == 0.0:
        out.append("no kernel of the candidate's own ran in this call (only torch glue: "
                   + (", ".join(sorted({n[:60] for n, _ in call.get("kernels", [])
                                        if n not in HARNESS_KERNELS})[:3]) or "no kernels at all") + ")")
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
            # Memcpy entries are left out (a copy of the output, the candidate's or a baseline's, is no kernel).
            if name not in HARNESS_KERNELS and not name.startswith("Memcpy") and name not in names:
                names.append(name)
    return names[:20]
