"""Triton GEMM with a fused bias + exact-GELU epilogue: C = gelu(A @ W^T + bias), one kernel, C written once.

Two main loops, one epilogue. With more than PERSISTENT_MIN_M rows and TMA-readable operands (16-bit, 16-byte
aligned rows) the persistent path (`_linear_gelu_tma_kernel`): gemm/triton_persistent's kernel (one program per SM
walking tiles of C, the flattened (tile, K step) loop pipelined across tiles, TMA loads and stores), W's (N, K) box
transposed in shared memory. Elsewhere (decode, fp32, odd strides) the tiled path (`_linear_gelu_kernel`):
solutions/gemm/triton_tiled.py's loop (one program per tile, grouped order, wrapped M/N tails, masked K tail only
when K % BLOCK_K != 0). No autotuning. What is specific here:

- W is read in nn.Linear's layout, (N, K) row-major, as the (K, N) operand W^T through its strides (stride_wk = 1):
  no transpose copy. Both operands are then K-major, the layout Hopper's wgmma reads natively.
- Epilogue in fp32 on the accumulator, before the single rounding to the output dtype:
  h = acc + bias[n] (bias loaded with the wrapped column index on the tiled path, masked on the persistent
  one), then gelu(h) = 0.5 * h * (1 + erf(h / sqrt(2))) with tl.math.erf (libdevice erff on the GPU, ~1 ulp;
  math.erf in the interpreter). This is the formula torch uses, in the same precision as torch's own opmath;
  unlike the eager path (GEMM rounded to bf16/fp16, then bias, then GELU: three roundings) it rounds once, so it is
  more accurate.
  bf16 values are converted to fp32 before any arithmetic (the CPU interpreter cannot do bf16 arithmetic).
- The epilogue is ~20 fp32 operations per element of C (erf the bulk) against 2*K FLOPs of the GEMM, but it runs
  on the warps that issue the MMAs, between one tile's last K step and the next tile's first: at K of 768 to 1280
  it is not noise. The persistent path hides it behind loads already in flight; its tile choice (`_tma_config`)
  is measured, not reasoned (docs/benchmarks.md). C is written once instead of written, re-read and re-written by
  a second kernel.
"""
import contextlib
import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

BACKEND = "triton"

PERSISTENT_MIN_M = 256   # fewer rows (decode) stay on the tiled kernel: one tile row, nothing to overlap
SHORT_K = 2048           # at most this K, the persistent path's smaller tile (see _tma_config)

_TORCH_TO_TL = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


@triton.jit
def _linear_gelu_kernel(a_ptr, w_ptr, bias_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_wn, stride_wk, stride_bias, stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                        EVEN_K: tl.constexpr, INT64: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                        OUT_DTYPE: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)  # the last group can be short
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    # Wrapped, not masked: every load address is in bounds, and the rows/columns past M/N never get stored.
    offs_am = offs_m % M
    offs_wn = offs_n % N
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_wn[None, :] * stride_wn   # the (K, N) view W^T

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            w = tl.load(w_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, w, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk

    # Epilogue, all in fp32: bias, then exact GELU, then one rounding.
    bias = tl.load(bias_ptr + offs_wn * stride_bias).to(tl.float32)
    h = acc + bias[None, :]
    out = 0.5 * h * (1.0 + tl.math.erf(h * 0.7071067811865476))
    c = out.to(OUT_DTYPE)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _linear_gelu_tma_kernel(a_desc, w_desc, bias_ptr, c_desc, M, N, K, stride_bias,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, EPI_SPLIT: tl.constexpr,
                            OUT_DTYPE: tl.constexpr):
    """The persistent path: one program per SM walking tiles of C over TMA descriptors of A (M, K) and W (N, K), both
    K-major as stored (W's box is transposed in shared memory for wgmma); the same fp32 epilogue, stored by TMA (it
    clips rows and columns past M and N) while the next tile's loads are in flight."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        first_pid_m = (tile_id // num_pid_in_group) * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        off_m = (first_pid_m + (tile_id % group_size_m)) * BLOCK_M
        off_n = ((tile_id % num_pid_in_group) // group_size_m) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])            # zero-filled past M and K
            w = w_desc.load([off_n, ki * BLOCK_K])            # zero-filled past N and K
            acc = tl.dot(a, w.T, acc)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        bias = tl.load(bias_ptr + offs_n * stride_bias, mask=offs_n < N, other=0.0).to(tl.float32)
        h = acc + bias[None, :]
        out = (0.5 * h * (1.0 + tl.math.erf(h * 0.7071067811865476))).to(OUT_DTYPE)
        if EPI_SPLIT:
            lo, hi = tl.split(tl.permute(tl.reshape(out, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            c_desc.store([off_m, off_n], lo)
            c_desc.store([off_m, off_n + BLOCK_N // 2], hi)
        else:
            c_desc.store([off_m, off_n], out)


@functools.lru_cache(maxsize=None)
def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # interpreter on the CPU: pretend H100, so it runs the configs an H100 would


@functools.lru_cache(maxsize=None)
def _smem(device):
    """Shared memory a program may use, in bytes (the interpreter pretends H100's 227 KiB)."""
    if device.type == "cuda":
        return getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", 227 * 1024)
    return 227 * 1024


def _fill_sms(M, N, bm, bn, n_sm):
    """(bm, bn) halved, N first then M and not below 64, while the tiles of C leave SMs idle (below 64, tensor-core
    tiles get inefficient)."""
    while triton.cdiv(M, bm) * triton.cdiv(N, bn) < n_sm:
        if bn > 64 and bn >= bm:
            bn //= 2
        elif bm > 64:
            bm //= 2
        else:
            break
    return bm, bn


def _pow2_at_least(x, lo):
    return max(lo, triton.next_power_of_2(x))


def _config(M, N, K, dtype, input_precision, n_sm, aligned=True):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), as solutions/gemm/triton_tiled.py chooses them."""
    if dtype == torch.float32 and input_precision == "ieee":
        bm, bn, bk = 64, 128, 32
    elif dtype == torch.float32:
        bm, bn, bk = 128, 128, 32
    elif aligned:
        bm, bn, bk = 128, 256, 64
    else:
        bm, bn, bk = 128, 128, 32  # rows not 16-element aligned (odd K): smaller tile, no spills
    bm = min(bm, _pow2_at_least(M, 16))
    bn = min(bn, _pow2_at_least(N, 16))
    bk = min(bk, _pow2_at_least(K, 16))
    bm, bn = _fill_sms(M, N, bm, bn, n_sm)
    num_warps = 8 if bm * bn >= 128 * 128 else 4
    num_stages = 3 if bm * bn >= 128 * 256 else 4
    return bm, bn, bk, num_warps, num_stages


def _tma_config(M, N, K, n_sm, smem):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, EPI_SPLIT, programs per SM) of the persistent path, one
    program an SM.

    K up to SHORT_K (the BERT and ViT FFN shapes): 128x128x64 tiles on 8 warps (two consumer warpgroups of 64 rows),
    the whole tile stored at once, 6 stages where the card's shared memory holds them (else 4 and a split store).
    A tile's GELU epilogue (an erf per element, on the warps that also issue the MMAs) is long next to a short K
    loop; with the smaller tile the next tiles' loads run further ahead of it. Longer K: gemm/triton_persistent's
    128x256x64 with as many 48 KiB stages as fit beside the store's 32 KiB buffer (it goes out in two halves). Both
    halve along N then M where the tiles leave SMs idle. Measured: docs/benchmarks.md, scripts/sweep_tiled.py."""
    short = K <= SHORT_K
    bm, bn, bk = 128, min(128 if short else 256, _pow2_at_least(N, 16)), min(64, _pow2_at_least(K, 16))
    bm, bn = _fill_sms(M, N, bm, bn, n_sm)
    stage = (bm + bn) * bk * 2
    if short and smem >= 6 * stage + bm * bn * 2 + 2048:
        return bm, bn, bk, 8 if bm * bn >= 128 * 128 else 4, 6, False, 1
    split = bn >= 128
    num_stages = max(2, min(4, (220 * 1024 - bm * (bn // 2 if split else bn) * 2) // stage))
    return bm, bn, bk, 8 if bm * bn >= 128 * 128 else 4, num_stages, split, 1


def _persistent(a, w, bias, c, n_sm):
    """The TMA path, or False where an operand is not a row-major matrix TMA can read (16-byte aligned base and row
    stride, unit inner stride): the tiled kernel takes those."""
    M, K = a.shape
    N = w.shape[0]
    es = a.element_size()
    if not (all(t.stride(1) == 1 and (t.stride(0) * es) % 16 == 0 and t.stride(0) >= K and t.data_ptr() % 16 == 0
                for t in (a, w)) and (N * es) % 16 == 0 and K > 0):
        return False
    bm, bn, bk, num_warps, num_stages, split, per_sm = _tma_config(M, N, K, n_sm, _smem(a.device))
    a_desc = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk])
    w_desc = TensorDescriptor(w, [N, K], [w.stride(0), 1], [bn, bk])
    c_desc = TensorDescriptor(c, [M, N], [N, 1], [bm, bn // 2 if split else bn])
    programs = per_sm * n_sm
    grid = (min(programs, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    _linear_gelu_tma_kernel[grid](a_desc, w_desc, bias, c_desc, M, N, K, bias.stride(0), BLOCK_M=bm, BLOCK_N=bn,
                                  BLOCK_K=bk, GROUP_M=8, NUM_SMS=programs, EPI_SPLIT=split,
                                  OUT_DTYPE=_TORCH_TO_TL[a.dtype], num_warps=num_warps, num_stages=num_stages)
    return True


def solve(a, w, bias):
    assert a.dim() == 2 and w.dim() == 2 and bias.dim() == 1, (tuple(a.shape), tuple(w.shape), tuple(bias.shape))
    assert a.shape[1] == w.shape[1] and bias.shape[0] == w.shape[0], (tuple(a.shape), tuple(w.shape))
    assert a.dtype == w.dtype == bias.dtype and a.dtype in _TORCH_TO_TL, (a.dtype, w.dtype, bias.dtype)
    assert a.device == w.device == bias.device
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    # K == 0 needs no special case: the loop runs zero times and C = gelu(bias).

    if a.dtype != torch.float32 and M > PERSISTENT_MIN_M:
        with torch.cuda.device(a.device) if a.is_cuda else contextlib.nullcontext():  # Triton's current device
            if _persistent(a, w, bias, c, _sm_count(a.device)):
                return c

    if a.dtype != torch.float32:
        input_precision = None
    elif torch.get_float32_matmul_precision() == "highest":
        input_precision = "ieee"
    else:
        input_precision = "tf32"
    # 16-byte rows (vector loads, cp.async): unit stride along K and a row stride divisible by 16 elements.
    aligned = all(t.stride(1) == 1 and t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0 for t in (a, w))
    bm, bn, bk, num_warps, num_stages = _config(M, N, max(K, 1), a.dtype, input_precision, _sm_count(a.device),
                                                aligned)
    int64 = any(sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride())) + bk * max(abs(s) for s in t.stride())
                >= 2**31 for t in (a, w, c))
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), )
    launch = _linear_gelu_kernel[grid]
    args = (a, w, bias, c, M, N, K, a.stride(0), a.stride(1), w.stride(0), w.stride(1), bias.stride(0),
            c.stride(0), c.stride(1))
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, EVEN_K=(K % bk == 0), INT64=int64,
                INPUT_PRECISION=input_precision, OUT_DTYPE=_TORCH_TO_TL[a.dtype], num_warps=num_warps,
                num_stages=num_stages)
    if a.is_cuda and a.device.index != torch.cuda.current_device():
        with torch.cuda.device(a.device):  # Triton launches on the current device
            launch(*args, **meta)
    else:
        launch(*args, **meta)
    return c
