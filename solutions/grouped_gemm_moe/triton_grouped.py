"""Grouped (MoE expert) GEMM in one Triton launch, with the tile schedule computed on the device.

out[rows_e] = x[rows_e] @ w[e].T, rows_e = [offs[e-1], offs[e]) (int32 cumulative end offsets, see reference.py).

Design:
- One launch, no host sync. The grid is sized from what the host already knows (M, E, N), never from offs: the
  number of BLOCK_M row tiles summed over experts is at most cdiv(M, BLOCK_M) + min(E, M) (each non-empty expert
  adds at most one partial tile, and at most min(E, M) experts are non-empty), so the grid covers that bound times
  the N tiles, and programs past the real tile count return at once. Nothing in solve() reads offs on the host,
  so the call is CUDA-graph capturable and costs one kernel launch.
- Device-side schedule, per program: load all E end offsets as one vector (E <= a few hundred), derive each
  expert's start, row count and tile count cdiv(count, BLOCK_M), take an inclusive prefix sum (tl.cumsum), and
  find this program's expert as the number of prefix sums <= its m-tile index. That is a few hundred integer ops
  per program, negligible next to the K loop, and it needs no precomputed table (no extra launches). Empty
  experts own zero tiles, so they are skipped for free; E = 1 is a plain GEMM.
- Rows: a tile never straddles two experts. Rows past the expert's end are clamped onto its last row for the
  loads (always in bounds, so A loads need no mask and stay vectorised) and masked out at the store, so no row is
  ever written with another expert's weights.
- Tile order: the standard grouped ("swizzled") order over (m-tile, n-tile): GROUP_M consecutive m-tiles are
  walked column by column, so programs running together share an expert's weight panel w[e][n-tile] in L2
  (at prefill an expert has many m-tiles; at decode each expert has one, and each weight byte is read once).
- Tiles from the shape, no autotune (its benchmarking would be timed): BLOCK_M follows the mean rows per expert,
  M / min(E, M), padded by 25% for the multinomial spread and rounded to a power of two in [16, 128]:
  * prefill (many rows per expert): 128 x 256 x 64, 8 warps, 3 stages, the usual Hopper bf16 config (wgmma, two
    warpgroups of 64 x 256); BN drops to 128 where that pads N less (N = 1408 -> 11 tiles of 128, not 6 of 256).
  * decode (a handful of rows per expert): the GEMM is bound by streaming w once, so BLOCK_M is small (16-64:
    little wasted MMA on padding rows), BLOCK_N 128, and BLOCK_K 128 with 3-4 stages keeps >= 100 KB of weight
    loads in flight per SM. If that leaves fewer programs than SMs, BLOCK_N halves (not below 64).
  * rows not 16-byte aligned (K not a multiple of 8): no vector loads, so a smaller 128 x 128 x 32 tile keeps
    the per-element addresses from spilling (as in solutions/gemm/triton_tiled.py).
  None of this was timed on an H100: these are reasoned choices, correctness first.
- K tail masked (other=0 adds nothing), only when K is not a multiple of BLOCK_K (EVEN_K); N tail wrapped (% N)
  for the loads and masked at the store. fp32 accumulator, one rounding to the output dtype at the store.
- Index math in int32 unless an operand has 2**31 elements (INT64); the expert's weight base is always int64.
- The offsets vector is padded to at least 64 lanes (E_P2), so E = 1..64 share one compiled kernel.

Floor (issue 54's 0.9 of the loop is not reached at the six prefill shapes on an H200; figures in
docs/benchmarks.md, "The last round in K-slices"): at Mixtral's down projection (8192 x 4096 x 14336, 8 experts)
Nsight Compute gives this kernel 2.05 ms against 1.56 ms for the loop's eight cuBLAS kernels and 1.56 ms for
triton_persistent.py, all three compute-bound (DRAM 16-32% of peak); here 1152 CTAs of 8 warps, one an SM (174
registers), the SMs 70% busy against 92-95%. What separates it from triton_persistent.py is that file's design:
TMA loads (no per-element addresses or clamped rows), a persistent walk whose next tile's loads overlap this tile's
epilogue, and the short last round cut into K-slices. This file stays the one-program-per-tile design; the
persistent file is the fast one.
"""
import functools

import torch
import triton
import triton.language as tl

BACKEND = "triton"
DTYPES = ("bfloat16", "float16")

_TORCH_TO_TL = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


# M, E and the tile bound only size loops and masks: not specializing them on divisibility saves recompiles as the
# token count changes from call to call (K and N still are: they set load alignment).
@triton.jit(do_not_specialize=["M", "E", "NUM_M_TILES"])
def _grouped_gemm_kernel(x_ptr, w_ptr, offs_ptr, out_ptr, M, N, K, E, NUM_M_TILES,
                         stride_xm, stride_xk, stride_we, stride_wn, stride_wk, stride_om, stride_on,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, E_P2: tl.constexpr, EVEN_K: tl.constexpr, INT64: tl.constexpr,
                         OUT_DTYPE: tl.constexpr):
    # Grouped program order over the (upper-bound) m-tile x n-tile grid.
    pid = tl.program_id(0)
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(NUM_M_TILES - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Device-side schedule: which expert owns m-tile pid_m, and where its rows start.
    eidx = tl.arange(0, E_P2)
    ends = tl.load(offs_ptr + eidx, mask=eidx < E, other=0)
    starts = tl.load(offs_ptr + eidx - 1, mask=(eidx > 0) & (eidx < E), other=0)
    tiles = (ends - starts + (BLOCK_M - 1)) // BLOCK_M          # 0 for empty experts and the E_P2 padding
    before = tl.cumsum(tiles, axis=0) <= pid_m                   # experts whose tiles all come before pid_m
    e = tl.sum(before.to(tl.int32), axis=0)                      # so pid_m belongs to expert e
    if e >= E:
        return                                                   # past the real tile count: nothing to do
    first_tile = tl.sum(tl.where(before, tiles, 0), axis=0)
    row_end = tl.load(offs_ptr + e)
    row_start = tl.load(offs_ptr + e - 1, mask=e > 0, other=0)

    offs_m = row_start + (pid_m - first_tile) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    rows = tl.minimum(offs_m, row_end - 1)      # clamped into this expert's rows: in bounds, never stored
    cols = offs_n % N                           # wrapped: in bounds, never stored
    a_ptrs = x_ptr + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_base = w_ptr + e.to(tl.int64) * stride_we
    b_ptrs = w_base + cols[None, :] * stride_wn + offs_k[:, None] * stride_wk   # (BLOCK_K, BLOCK_N) view of w[e].T

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, (K + BLOCK_K - 1) // BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_xk
        b_ptrs += BLOCK_K * stride_wk

    c = acc.to(OUT_DTYPE)
    c_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < row_end) & (offs_n[None, :] < N))


@functools.lru_cache(maxsize=None)
def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the CPU interpreter: pretend H100, so it runs the configs an H100 would


def _p2(x, lo):
    return max(lo, triton.next_power_of_2(max(1, x)))


def _config(M, N, K, E, aligned, n_sm):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); see the module docstring."""
    rows_per_expert = M / min(E, M)
    bm = min(128, _p2(int(rows_per_expert * 1.25 + 0.999), 16))
    if not aligned:
        bn, bk = 128, 32
    elif bm == 128:
        # the N tile that pads N least; 256 on a tie
        bn = min((256, 128), key=lambda t: (triton.cdiv(N, t) * t, -t))
        bk = 64
    else:
        bn, bk = 128, 128
    bn = min(bn, _p2(N, 16))
    bk = min(bk, _p2(K, 16))
    m_tiles = triton.cdiv(M, bm) + min(E, M)
    while bn > 64 and m_tiles * triton.cdiv(N, bn) < n_sm:
        bn //= 2
    if bm == 128:
        num_warps = 8 if bn >= 128 else 4
        num_stages = 3 if bn * bk >= 256 * 64 else 4
    else:
        num_warps = 4
        num_stages = 3 if (bm + bn) * bk >= 192 * 128 else 4
    return bm, bn, bk, num_warps, num_stages


def solve(x, w, offs):
    assert x.dim() == 2 and w.dim() == 3 and offs.dim() == 1, (x.shape, w.shape, offs.shape)
    assert x.shape[1] == w.shape[2] and offs.shape[0] == w.shape[0], (x.shape, w.shape, offs.shape)
    assert x.dtype == w.dtype and x.dtype in _TORCH_TO_TL, (x.dtype, w.dtype)
    M, K = x.shape
    E, N, _ = w.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.zero_()
    offs = offs.to(torch.int32).contiguous()     # no-op for the convention's int32 offsets
    aligned = all(t.stride(-2) % 8 == 0 and t.data_ptr() % 16 == 0 for t in (x, w)) and x.stride(1) == 1 \
        and w.stride(2) == 1
    bm, bn, bk, num_warps, num_stages = _config(M, N, K, E, aligned, _sm_count(x.device))
    m_tiles = triton.cdiv(M, bm) + min(E, M)
    int64 = max(x.numel(), N * K, out.numel()) >= 2**31
    grid = (m_tiles * triton.cdiv(N, bn),)
    args = (x, w, offs, out, M, N, K, E, m_tiles,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), w.stride(2), out.stride(0), out.stride(1))
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, E_P2=_p2(E, 64), EVEN_K=(K % bk == 0),
                INT64=int64, OUT_DTYPE=_TORCH_TO_TL[x.dtype], num_warps=num_warps, num_stages=num_stages)
    if x.is_cuda and x.device.index != torch.cuda.current_device():
        with torch.cuda.device(x.device):  # Triton launches on the current device
            _grouped_gemm_kernel[grid](*args, **meta)
    else:
        _grouped_gemm_kernel[grid](*args, **meta)
    return out
