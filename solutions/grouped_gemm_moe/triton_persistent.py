"""Persistent, TMA-fed grouped (MoE expert) GEMM: out[rows_e] = x[rows_e] @ w[e].T in one launch, no host sync.

rows_e = [offs[e-1], offs[e]) from the int32 cumulative end offsets (reference.py beside the problem).

What it adds to triton_grouped.py (one program per tile, pointer loads):
- Persistent programs: the grid is the SM count and each program walks tiles tile_id, tile_id + #SMs, ...
  The number of real tiles depends on offs, which lives on the device, so each program computes it there (sum
  over experts of cdiv(rows_e, BLOCK_M), times the N tiles): no over-sized grid of programs that exit at once, no
  host read of offs, the call stays graph-capturable. `flatten=True` lets the compiler pipeline the flattened
  (tile, K-step) loop, so the next tile's first loads are in flight during this tile's epilogue.
- TMA loads from two host-built descriptors: x as (M, K) and w as one (E * N, K) matrix whose row e * N + n is
  expert e's output feature n. The expert is picked at run time by the row coordinate, so one descriptor serves
  every expert and none has to be built on the device. A tile never straddles two experts' *stored* rows, but it
  may *load* past them: rows past the expert's end belong to the next expert (or lie past M, where TMA
  zero-fills), columns past N read the next expert's first features (or zeros past E * N); those rows and
  columns of the accumulator are never stored. The K tail is zero-filled by TMA, so no K masks.
- Store: masked pointer stores (rows past the expert's end and columns past N dropped), so the next expert's
  rows are never written. (A TMA store for the tiles that lie wholly inside their expert, with the masked store
  kept for the expert's last tile, did not compile under Triton 3.6 on an H100: "PassManager::run failed".)
- The device-side schedule per tile (as in triton_grouped.py): the E end offsets as one vector, tiles per expert,
  an inclusive cumsum, the tile's expert = how many cumulative counts are <= its m-tile index. A few hundred
  integer ops per tile against a K loop of thousands of MMA cycles.
- TMA needs 16-byte aligned bases and row strides: K a multiple of 8 (16-bit data). Other shapes take the
  same persistent walk with pointer loads (rows clamped into the expert, N wrapped, K masked): correct, not fast.
- Tiles from the shape, as in triton_grouped.py (BLOCK_M follows the mean rows per expert), no autotuning.
- The last round, K-sliced: the programs walk whole rounds of tiles (one a program); when the tiles left after
  them would keep at most half the programs busy while the rest idle for a whole tile's K loop, each of those
  tiles is cut into K-slices, one a program (prefill tiles, at most 8 slices of at least 4 K-steps each). Each
  slice writes its fp32 sum to a slot of its own and takes a ticket; the slice that takes a tile's last ticket
  adds the slots in slice order and stores the tile, so no program waits on another and the output is the same
  bits every call. Mixtral's down projection (8192 x 4096 x 14336, 8 experts) gives 1088 tiles of 128 x 256 to
  132 SMs: 8 whole rounds and 32 tiles, which cost a ninth round whole and about a quarter of one in 4 slices.

Floor and prediction before the first H100 measurement (cuBLAS-class bf16 ~770 TFLOP/s, HBM ~3.0 TB/s):
- DeepSeek-V3 prefill (M = 32768, 32 experts x 2048 x 7168): 0.96 TFLOP -> 1.25 ms at 770 TFLOP/s; the tiled
  kernel reads 0.80x torch._grouped_mm there. Predicted 0.95x-1.05x _grouped_mm.
- Decode (M = 1024, same experts): w is 940 MB, 0.31 ms at 3.0 TB/s, the MMA is nothing; predicted within 10%
  of the bandwidth floor, so >= 2x the cuBLAS loop (32 launches, each too small to fill the GPU).

Measured (docs/benchmarks.md: the first H100 table under "Figures moved from docstrings", the H200 figures in the
dated entries): the decode shapes stream the weights close to the copy bandwidth; the prefill shapes run at
cuBLAS-class rates, and what is left against _grouped_mm (CUTLASS, warp-specialized) is the warp specialization
Triton 3.6 offers only on Blackwell. Tried and not kept (a do_bench sweep, same place): 2 stages instead of 3,
128-wide N tiles at prefill, BLOCK_K 64 at decode, GROUP_M 16.
"""
import contextlib
import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

BACKEND = "triton"
DTYPES = ("bfloat16", "float16")

_TORCH_TO_TL = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


@triton.jit
def _schedule(offs_ptr, E, BLOCK_M: tl.constexpr, E_P2: tl.constexpr):
    """Per-expert (start, end, tiles, cumulative tiles) vectors, and the total m-tile count."""
    eidx = tl.arange(0, E_P2)
    ends = tl.load(offs_ptr + eidx, mask=eidx < E, other=0)
    starts = tl.load(offs_ptr + eidx - 1, mask=(eidx > 0) & (eidx < E), other=0)
    tiles = (ends - starts + (BLOCK_M - 1)) // BLOCK_M          # 0 for empty experts and the padding lanes
    csum = tl.cumsum(tiles, axis=0)
    return eidx, starts, ends, tiles, csum, tl.sum(tiles, axis=0)


@triton.jit
def _locate(tile_id, m_tiles, N, eidx, starts, ends, tiles, csum,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile -> (expert, first row, the expert's end row, first column), tiles walked in grouped order."""
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (tile_id // num_pid_in_group) * GROUP_M
    group_size_m = min(m_tiles - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    before = csum <= pid_m                                       # experts whose tiles all come before pid_m
    e = tl.sum(before.to(tl.int32), axis=0)
    first_tile = tl.sum(tl.where(before, tiles, 0), axis=0)
    row_start = tl.sum(tl.where(eidx == e, starts, 0), axis=0)
    row_end = tl.sum(tl.where(eidx == e, ends, 0), axis=0)
    return e, row_start + (pid_m - first_tile) * BLOCK_M, row_end, pid_n * BLOCK_N


@triton.jit
def _tile_sum(x_desc, w_desc, m0, w_row, k_lo, k_hi, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):
    """fp32 sum over the K-steps [k_lo, k_hi) of one tile."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_lo, k_hi):
        a = x_desc.load([m0, ki * BLOCK_K])
        b = w_desc.load([w_row, ki * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    return acc


@triton.jit
def _store_tile(out_ptr, acc, m0, row_end, n0, N, stride_om, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                OUT_DTYPE: tl.constexpr):
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = n0 + tl.arange(0, BLOCK_N)
    ptrs = out_ptr + offs_m.to(tl.int64)[:, None] * stride_om + offs_n[None, :]
    tl.store(ptrs, acc.to(OUT_DTYPE), mask=(offs_m[:, None] < row_end) & (offs_n[None, :] < N))


@triton.jit(do_not_specialize=["M", "E"])
def _grouped_tma_kernel(x_desc, w_desc, offs_ptr, out_ptr, part_ptr, ticket_ptr, M, N, K, E, stride_om,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                        E_P2: tl.constexpr, NUM_SMS: tl.constexpr, OUT_DTYPE: tl.constexpr,
                        MAX_SLICES: tl.constexpr):
    eidx, starts, ends, tiles, csum, m_tiles = _schedule(offs_ptr, E, BLOCK_M, E_P2)
    num_tiles = m_tiles * tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # The last round of tiles, when it would leave SMs idle, is cut along K: `slices` programs per tile, each
    # summing a share of the K-steps (see _tail_slices).
    whole, tail, slices = _tail_slices(num_tiles, k_tiles, NUM_SMS, MAX_SLICES)
    for tile_id in tl.range(tl.program_id(0), whole, NUM_SMS, flatten=True):
        e, m0, row_end, n0 = _locate(tile_id, m_tiles, N, eidx, starts, ends, tiles, csum, BLOCK_M, BLOCK_N,
                                     GROUP_M)
        acc = _tile_sum(x_desc, w_desc, m0, e * N + n0, 0, k_tiles, BLOCK_M, BLOCK_N, BLOCK_K)
        _store_tile(out_ptr, acc, m0, row_end, n0, N, stride_om, BLOCK_M, BLOCK_N, OUT_DTYPE)
    unit = tl.program_id(0)
    if unit < tail * slices:
        t = unit // slices
        s = unit % slices
        e, m0, row_end, n0 = _locate(whole + t, m_tiles, N, eidx, starts, ends, tiles, csum, BLOCK_M, BLOCK_N,
                                     GROUP_M)
        per = tl.cdiv(k_tiles, slices)
        acc = _tile_sum(x_desc, w_desc, m0, e * N + n0, s * per, tl.minimum(k_tiles, s * per + per), BLOCK_M,
                        BLOCK_N, BLOCK_K)
        if slices == 1:
            _store_tile(out_ptr, acc, m0, row_end, n0, N, stride_om, BLOCK_M, BLOCK_N, OUT_DTYPE)
        else:
            # Each slice leaves its fp32 sum in its own slot of part_ptr; the slice that takes the tile's last
            # ticket adds the slots in slice order (the same sums in the same order whichever slice ends last, so
            # the output is the same bits every call) and stores the tile. The barrier puts every thread's
            # partial store before the ticket (a release at GPU scope); the acquire puts the other slices' stores
            # before this one's loads, which bypass L1 (.cg). No program waits for another.
            r = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            tl.store(part_ptr + unit.to(tl.int64) * (BLOCK_M * BLOCK_N) + r, acc)
            tl.debug_barrier()
            ticket = tl.atomic_add(ticket_ptr + t, 1, sem="acq_rel", scope="gpu")
            if ticket == slices - 1:
                tl.debug_barrier()
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for j in range(slices):
                    slot = (t * slices + j).to(tl.int64) * (BLOCK_M * BLOCK_N)
                    acc += tl.load(part_ptr + slot + r, cache_modifier=".cg")
                _store_tile(out_ptr, acc, m0, row_end, n0, N, stride_om, BLOCK_M, BLOCK_N, OUT_DTYPE)


@triton.jit
def _tail_slices(num_tiles, k_tiles, NUM_SMS: tl.constexpr, MAX_SLICES: tl.constexpr):
    """(tiles of whole rounds, tiles left, slices per tile left). A round is one tile per program. When the tiles
    left would fill at most half the programs, each is cut into as many K-slices as give every program one (at
    most MAX_SLICES, each at least 4 K-steps long); otherwise the last round runs whole (slices = 1)."""
    tail = num_tiles % NUM_SMS
    whole = num_tiles - tail
    slices = tl.minimum(NUM_SMS // tl.maximum(tail, 1), tl.minimum(MAX_SLICES, k_tiles // 4))
    if 2 * tail > NUM_SMS:
        slices = 1
    slices = tl.maximum(slices, 1)
    return whole, tail, slices


@triton.jit(do_not_specialize=["M", "E"])
def _grouped_ptr_kernel(x_ptr, w_ptr, offs_ptr, out_ptr, M, N, K, E,
                        stride_xm, stride_xk, stride_we, stride_wn, stride_wk, stride_om, stride_on,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                        E_P2: tl.constexpr, NUM_SMS: tl.constexpr, INT64: tl.constexpr, OUT_DTYPE: tl.constexpr):
    """Unaligned rows: the same walk with pointer loads (rows clamped into the expert, N wrapped, K masked)."""
    eidx, starts, ends, tiles, csum, m_tiles = _schedule(offs_ptr, E, BLOCK_M, E_P2)
    num_tiles = m_tiles * tl.cdiv(N, BLOCK_N)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS):
        e, m0, row_end, n0 = _locate(tile_id, m_tiles, N, eidx, starts, ends, tiles, csum, BLOCK_M, BLOCK_N,
                                     GROUP_M)
        offs_m = m0 + tl.arange(0, BLOCK_M)
        offs_n = n0 + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        if INT64:
            offs_m = offs_m.to(tl.int64)
            offs_n = offs_n.to(tl.int64)
            offs_k = offs_k.to(tl.int64)
        rows = tl.minimum(offs_m, row_end - 1)
        cols = offs_n % N
        a_ptrs = x_ptr + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk
        b_ptrs = w_ptr + e.to(tl.int64) * stride_we + cols[None, :] * stride_wn + offs_k[:, None] * stride_wk
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_xk
            b_ptrs += BLOCK_K * stride_wk
        c_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
        tl.store(c_ptrs, acc.to(OUT_DTYPE), mask=(offs_m[:, None] < row_end) & (offs_n[None, :] < N))


@functools.lru_cache(maxsize=None)
def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the CPU interpreter: pretend H100, so it walks tiles as an H100 would


def _p2(x, lo):
    return max(lo, triton.next_power_of_2(max(1, x)))


_MAX_SLICES = 8   # K-slices per tile of a short last round (prefill tiles only; _tail_slices)


def _config(M, N, K, E, tma, n_sm):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages).

    BLOCK_M follows the mean rows per expert (padded 25% for the multinomial spread, a power of two in [16, 128]).
    Prefill (128 rows): 128 x 256 x 64 or 128 x 128 x 64 (the N tile that pads N least), 8 warps. Decode: a
    small BLOCK_M, BLOCK_N 128 and BLOCK_K 128, so each SM keeps >= 100 KiB of weight loads in flight. Stages:
    as many as fit in ~220 KiB beside the epilogue's layout-conversion buffer, at most 5. Unaligned rows:
    128 x 128 x 32."""
    bm = min(128, _p2(int(M / min(E, M) * 1.25 + 0.999), 16))
    if not tma:
        bn, bk = 128, 32
    elif bm == 128:
        bn = min((256, 128), key=lambda t: (triton.cdiv(N, t) * t, -t))
        bk = 64
    else:
        bn, bk = 128, 128
    bn = min(bn, _p2(N, 16))
    bk = min(bk, _p2(K, 16))
    m_tiles = triton.cdiv(M, bm) + min(E, M)
    while bn > 64 and m_tiles * triton.cdiv(N, bn) < n_sm:
        bn //= 2
    num_warps = 8 if bm == 128 and bn >= 128 else 4
    if not tma:
        return bm, bn, bk, num_warps, 3
    stage = (bm + bn) * bk * 2
    num_stages = max(2, min(5, (220 * 1024 - bm * bn * 2) // stage))
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
    w = w.contiguous()                           # no-op for the convention's contiguous weights
    esize = x.element_size()
    tma = (x.stride(1) == 1 and (x.stride(0) * esize) % 16 == 0 and (K * esize) % 16 == 0
           and all(t.data_ptr() % 16 == 0 for t in (x, w)))       # the store is not TMA: N may be anything
    n_sm = _sm_count(x.device)
    bm, bn, bk, num_warps, num_stages = _config(M, N, K, E, tma, n_sm)
    bound = (triton.cdiv(M, bm) + min(E, M)) * triton.cdiv(N, bn)     # the most tiles any offs can give
    grid = (min(n_sm, bound),)
    common = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, E_P2=_p2(E, 64), NUM_SMS=grid[0],
                  OUT_DTYPE=_TORCH_TO_TL[x.dtype], num_warps=num_warps, num_stages=num_stages)
    with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():   # Triton uses the current device
        if tma:
            x_desc = TensorDescriptor(x, [M, K], [x.stride(0), 1], [bm, bk])
            w_desc = TensorDescriptor(w, [E * N, K], [K, 1], [bn, bk])
            # Slots for the last round's K-slices (one a program) and a ticket a tile, zeroed each call; where
            # nothing is sliced (decode tiles), placeholders that cost no kernel.
            slices = _MAX_SLICES if bm == 128 else 1
            if slices > 1:
                part = torch.empty((grid[0], bm * bn), dtype=torch.float32, device=x.device)
                tickets = torch.zeros(grid[0], dtype=torch.int32, device=x.device)
            else:
                part = torch.empty(1, dtype=torch.float32, device=x.device)
                tickets = torch.empty(1, dtype=torch.int32, device=x.device)
            _grouped_tma_kernel[grid](x_desc, w_desc, offs, out, part, tickets, M, N, K, E, out.stride(0),
                                      MAX_SLICES=slices, **common)
        else:
            int64 = max(x.numel(), N * K, out.numel()) >= 2**31
            _grouped_ptr_kernel[grid](x, w, offs, out, M, N, K, E, x.stride(0), x.stride(1), w.stride(0),
                                      w.stride(1), w.stride(2), out.stride(0), out.stride(1), INT64=int64, **common)
    return out
