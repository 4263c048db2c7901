"""Tiled Triton W8A8 GEMM: out = bf16((x @ w^T) * sx[:, None] * sw[None, :]), one program per output tile.

The main loop is solutions/int8_gemm/triton_int8.py's (same reasoning, repeated here briefly since a solution is one
file); only the epilogue differs.
- Integer tensor cores: tl.dot on int8 tiles with out_dtype=tl.int32 accumulates exactly (wgmma .s32.s8.s8 on
  Hopper). Under the CPU interpreter tl.dot is np.matmul(int8, int8, dtype=int32) (triton 3.6), exact too.
- K-major operands: the W tile is a (BLOCK_K, BLOCK_N) view of W^T with K fastest, as Hopper's 8-bit wgmma needs.
- Tiles 128x256x128, 8 warps, 3 stages for large shapes (Triton's Hopper recipe for 8-bit operands), halved N
  first when there are fewer tiles than SMs (decode), BLOCK_N down to 32 and BLOCK_K up to 256 for short M.
  Reasoned, not tuned on an H100.
- Tails: rows/columns past M/N are wrapped (% M, % N) so loads stay unmasked and are dropped at the store; the K
  tail is masked with zeros only when K is not a multiple of BLOCK_K.
- Epilogue: acc (exact int32) -> fp32, times sx (row) then sw (column) in fp32, in that order (what reference()
  does, so most elements match torch bit for bit), then one round-to-nearest-even to bf16 at the store. All of it
  in fp32: the interpreter cannot do bf16 arithmetic, and the GPU would gain nothing from it.
- No autotune; a host-side heuristic picks one config per shape.
"""
import functools

import torch
import triton
import triton.language as tl

BACKEND = "triton"


@triton.jit
def _w8a8_kernel(a_ptr, sx_ptr, w_ptr, sw_ptr, c_ptr, M, N, K,
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

    sx = tl.load(sx_ptr + offs_am)        # wrapped offsets: in bounds; those rows/columns are not stored
    sw = tl.load(sw_ptr + offs_wn)
    out = acc.to(tl.float32) * sx[:, None] * sw[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, out.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


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


def solve(x, sx, w, sw):
    assert x.dim() == 2 and w.dim() == 2 and x.shape[1] == w.shape[1], (tuple(x.shape), tuple(w.shape))
    assert x.dtype == torch.int8 and w.dtype == torch.int8, (x.dtype, w.dtype)
    M, K = x.shape
    N = w.shape[0]
    assert sx.shape == (M,) and sw.shape == (N,), (tuple(sx.shape), tuple(sw.shape))
    assert sx.dtype == torch.float32 and sw.dtype == torch.float32, (sx.dtype, sw.dtype)
    assert x.device == w.device == sx.device == sw.device
    sx = sx.contiguous()
    sw = sw.contiguous()
    c = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    bm, bn, bk, num_warps, num_stages = _config(M, N, K, _sm_count(x.device))
    int64 = max(x.numel(), w.numel(), c.numel()) >= 2**31
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    args = (x, sx, w, sw, c, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), c.stride(0), c.stride(1))
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, EVEN_K=(K % bk == 0), INT64=int64,
                num_warps=num_warps, num_stages=num_stages)
    if x.is_cuda and x.device.index != torch.cuda.current_device():
        with torch.cuda.device(x.device):
            _w8a8_kernel[grid](*args, **meta)
    else:
        _w8a8_kernel[grid](*args, **meta)
    return c
