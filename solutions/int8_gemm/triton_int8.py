"""Tiled Triton int8 GEMM: C = A @ W^T, int8 x int8 -> int32 exactly, one program per (BLOCK_M, BLOCK_N) tile.

Why it looks the way it does:
- Integer tensor cores. tl.dot on int8 operands with out_dtype=tl.int32 accumulates exactly in int32 (wgmma
  .s32.s8.s8 on Hopper, mma.sync m16n8k32 on Ampere). No rounding anywhere, so the answer is bit-exact whatever
  the tiling or the K order (integer addition is associative; the problem bounds K so int32 cannot overflow).
  Under the CPU interpreter tl.dot runs np.matmul(int8, int8, dtype=int32) (triton 3.6, InterpreterBuilder.
  create_dot), also exact, so the same kernel runs in CI unchanged.
- K-major operands. W is (N, K) row-major; the B tile is read as a (BLOCK_K, BLOCK_N) view of W^T whose fast axis
  is K (`offs_k` has stride 1). Both smem tiles are then K-major, which Hopper's 8-bit wgmma requires (it can only
  transpose 16-bit operands): no transpose on the way to the tensor cores.
- Tiles. 128x256x128, 8 warps, 3 stages for the large shapes: Triton's own Hopper recipe for 8-bit operands (its
  matmul tutorial's fp8 config); 48 KiB of operands per stage, 144 KiB for 3 stages; the 128x256 int32 accumulator
  is 128 registers per thread, as for bf16 with fp32 accumulation. Reasoned, not tuned: none timed on an H100.
  When that leaves fewer tiles than SMs (decode, M = 16 or 128) the tile is halved, N first, so more SMs pull on
  memory: those shapes are bandwidth-bound on W. With a short M (<= 32 rows) BLOCK_N may go down to 32 and
  BLOCK_K up to 256 (fewer, larger loads per W row). Small dims clamp the tile (BLOCK_K >= 32: tl.dot's minimum
  K for 8-bit operands; BLOCK_M/N >= 16).
- Grouped program order (GROUP_M = 8) so concurrently running programs share A and W panels in L2.
- Tails. Rows past M / columns past N are wrapped (% M, % N): every load is in bounds and unmasked, the extra
  rows/columns are computed and dropped by the masked store. The K tail is masked with other=0 (adds nothing), and
  only when K is not a multiple of BLOCK_K does the loop pay for that mask (EVEN_K).
- int64 offsets only when an operand has 2**31 elements or more.
- No autotune (the harness would time its benchmarking); a host-side heuristic picks one config per shape.
"""
import functools

import torch
import triton
import triton.language as tl

BACKEND = "triton"


@triton.jit
def _int8_gemm_kernel(a_ptr, w_ptr, c_ptr, M, N, K,
                      stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      EVEN_K: tl.constexpr, INT64: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    offs_am = offs_m % M          # wrapped: in bounds, never stored
    offs_wn = offs_n % N
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    # (BLOCK_K, BLOCK_N) tile of W^T, K fastest: a K-major B operand.
    b_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_wn[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_wk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@functools.lru_cache(maxsize=None)
def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # interpreter on the CPU: pretend H100, so it runs the configs an H100 would


def _pow2_at_least(x, lo):
    return max(lo, triton.next_power_of_2(x))


def _config(M, N, K, n_sm):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); see the module docstring."""
    bm, bn, bk = 128, 256, 128
    bm = min(bm, _pow2_at_least(M, 16))
    bn = min(bn, _pow2_at_least(N, 16))
    small_m = bm <= 32
    if small_m:
        bk = 256                        # decode: few rows, stream W in long K strips
    bk = min(bk, _pow2_at_least(K, 32))
    min_bn = 32 if small_m else 64
    while triton.cdiv(M, bm) * triton.cdiv(N, bn) < n_sm:
        if bn > min_bn and bn >= bm:
            bn //= 2
        elif bm > 64:
            bm //= 2
        else:
            break
    num_warps = 8 if bm * bn >= 128 * 128 else 4
    num_stages = 3 if bm * bn >= 128 * 256 else 4
    return bm, bn, bk, num_warps, num_stages


def solve(a, w):
    assert a.dim() == 2 and w.dim() == 2 and a.shape[1] == w.shape[1], (tuple(a.shape), tuple(w.shape))
    assert a.dtype == torch.int8 and w.dtype == torch.int8, (a.dtype, w.dtype)
    assert a.device == w.device, (a.device, w.device)
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), dtype=torch.int32, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    bm, bn, bk, num_warps, num_stages = _config(M, N, K, _sm_count(a.device))
    int64 = max(a.numel(), w.numel(), c.numel()) >= 2**31
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    args = (a, w, c, M, N, K, a.stride(0), a.stride(1), w.stride(0), w.stride(1), c.stride(0), c.stride(1))
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, EVEN_K=(K % bk == 0), INT64=int64,
                num_warps=num_warps, num_stages=num_stages)
    if a.is_cuda and a.device.index != torch.cuda.current_device():
        with torch.cuda.device(a.device):
            _int8_gemm_kernel[grid](*args, **meta)
    else:
        _int8_gemm_kernel[grid](*args, **meta)
    return c
