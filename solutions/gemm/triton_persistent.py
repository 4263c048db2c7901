"""Persistent Triton GEMM fed by Hopper's TMA: C = A @ B, one program per SM walking tiles of C, fp32 accumulator.

Why it exists next to triton_tiled.py (one program per tile, pointer loads): at the large shapes the tiled kernel
reads 0.92x-0.98x cuBLAS on an H100. What separates the two is work the tiled kernel repeats per tile and per
K step, not the MMA itself:
- Persistent programs (grid = SM count, tile_id += SM count). No wave quantization tail of launched-but-waiting
  programs, and with `flatten=True` the compiler pipelines the flattened (tile, K-step) loop, so the next tile's
  first loads are in flight while this tile's epilogue runs.
- TMA loads (host-built tensor descriptors over A, B and C): one thread issues a whole BLOCK_M x BLOCK_K box, the
  copy engine computes addresses and zero-fills what falls outside the matrix, so the K, M and N tails need no
  masks and no wrapped indices, and registers stay free for the accumulator. The store goes through TMA too
  (it clips rows/columns past M/N), in two halves of BLOCK_N / 2 (EPI_SPLIT) so its shared-memory staging
  buffer is 32 KiB and 4 pipeline stages still fit beside it.
- A short last round, K-sliced (`_last_round`): where the tiles left after the whole rounds would keep at most half
  the programs busy, each is cut into K-slices, one a program; each slice writes its fp32 sum to a slot of its own
  and takes a ticket, and the slice that takes a tile's last ticket adds the slots in slice order and stores the
  tile (no program waits on another; the same bits every call). Among the benchmark shapes only 16384x7168x2048
  has such a round (20 tiles of 3584 on 132 SMs).
- Grouped ("swizzled") tile order as in triton_tiled.py: GROUP_M row-blocks walked column by column so the
  programs running at once share A and B panels in L2.
- TMA needs 16-byte aligned bases and row strides (K and N multiples of 8 for 16-bit data). Other shapes (the
  fuzzer's primes) take the same persistent loop with pointer loads: K tail masked, M/N wrapped, masked store.
  They are correct, not fast.
- No autotuning (its benchmarking would run inside a timed call); `_config` picks one config per shape class.

Floor and prediction, written before the first H100 measurement (facts: cuBLAS bf16 ~770 TFLOP/s at 8192^3 on an
H100 SXM, dense bf16 peak 989 TFLOP/s; HBM ~3.0 TB/s measured copy):
- 8192^3: 1.10 TFLOP -> floor 1.11 ms at peak, cuBLAS ~1.43 ms. Predicted 0.97x-1.02x cuBLAS.
- 4096^3: 0.137 TFLOP, 0.14 ms at peak; 1024 tiles of 128x256 over 132 SMs = 7.76 waves, so the tiled kernel's
  last wave is 76% full; persistent cannot fix the tile count but overlaps epilogues. Predicted ~1.0x.
- 16384x7168x2048: K = 2048 is only 32 K-steps of 64, so the epilogue (writing 224 MiB of C) is a large share:
  C alone is 75 us at 3.0 TB/s against ~0.62 ms of MMA; overlapping it is the point. Predicted ~0.97x-1.0x.
- M = 128 decode shapes: bound by reading B once (117 MiB, ~39 us at 3 TB/s); predicted no better than the tiled
  kernel with one tile of C per program.
- Few rows (M <= 256) take their own kernel (`_splitk_config`): not persistent, 64x128x64 tiles, 4 stages, 4 warps
  (two programs per SM), and K cut into slices when the tiles of C leave more than half the SMs idle, as many
  slices as the card's SMs hold programs (SM count and shared memory read from the device), the fp32 partial sums
  added in order by a second kernel. In CUDA-graph sweeps on an H200 (the few-row shapes 128x14336x4096,
  128x4096x14336, 256x4096x4096, 64x14336x4096) this one config read 0.97x-1.02x cuBLAS at every shape, where the
  best config of each shape differed (up to 1.15x at M = 256) and 128-row tiles lost up to 2x at M = 256; slicing
  where the tiles already filled the card lost 20-50% (the second kernel and the fp32 copies of C). Where 128 x 128
  tiles number more than half the SMs and at most all of them (M = 128, N = 14336), one such program an SM with 5
  stages streams B faster than two 64 x 128 programs (Gauntlet on an H200: about 3% at that shape).
  The second kernel is launched with programmatic dependent launch (Hopper's PDL): every split-K program lets it
  launch as it starts, its programs are placed while the split-K grid runs and wait on the device (`gdc_wait`) for
  that grid to end and its stores to show, so no launch gap and no ramp sits between the two kernels (1.4 to 2.6%
  of the decode call at 128x4096x14336 on an H200).
  Tried and not kept: the slices summed inside the kernel (a ticket a tile; the program taking the last ticket adds
  the slices and stores C, no second kernel): about 3% slower at M = 128, N = 4096, K = 14336 on an H200, the last
  program's pass over the S slices sitting on the critical path where the second kernel spreads it over the card.
Measured (docs/benchmarks.md, "Figures moved from docstrings", and the dated entries after it): parity with cuBLAS
at the large shapes on an H100 and an H200, not a clear win. do_bench's sweep figures moved by up to 9% between
configs that were in fact identical (power and clocks), so the config choices (GROUP_M 8, 3 stages, split store)
rest on Gauntlet's interleaved figures, not on the sweep's ranking.
- Tried and slower in the sweep: GROUP_M 16/32, 256x128 tiles, 128x256x128 with 2 stages.
- Tried and not kept: stream-K on the last round (its tiles' K-steps cut into equal chunks, one a program, wherever
  the round would leave an eighth of the programs idle). A tile split between programs costs fp32 slots written
  and read back on the critical path, more than most tails leave idle: 0.5 to 1.8% slower at 16384x7168x2048 and
  4096x14336x4096 on an H200, 9 to 10% at 4096^3 (streamed at every tail), 0 to 0.9% faster at 8192^3
  (docs/benchmarks.md, 2026-11-29).
  And 128-row tiles at 128x4096x14336: 128 x 128 (8 slices, or 4 with 3 stages) about 10% slower than 64 x 128,
  128 x 64 2 to 3%.
- The decode shapes on the persistent walk (before the few-row kernel) lost to a 1.7-wave tail (224 tiles of 128x64
  over 132 programs): the reason the few-row kernel exists.
"""
import contextlib
import functools

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
from triton.tools.tensor_descriptor import TensorDescriptor

BACKEND = "triton"
DTYPES = ("bfloat16", "float16")

_TORCH_TO_TL = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped order: GROUP_M row-blocks of C walked column by column."""
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _tile_sum(a_desc, b_desc, off_m, off_n, k_lo, k_hi, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):
    """fp32 sum over the K-steps [k_lo, k_hi) of one tile."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_lo, k_hi):
        a = a_desc.load([off_m, ki * BLOCK_K])          # zero-filled past M and K
        b = b_desc.load([ki * BLOCK_K, off_n])          # zero-filled past K and N
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _store_tile(c_desc, acc, off_m, off_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EPI_SPLIT: tl.constexpr,
                OUT_DTYPE: tl.constexpr):
    if EPI_SPLIT:
        halves = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2))
        lo, hi = tl.split(tl.permute(halves, (0, 2, 1)))
        c_desc.store([off_m, off_n], lo.to(OUT_DTYPE))
        c_desc.store([off_m, off_n + BLOCK_N // 2], hi.to(OUT_DTYPE))
    else:
        c_desc.store([off_m, off_n], acc.to(OUT_DTYPE))   # clipped at M and N


@triton.jit
def _gemm_tma_kernel(a_desc, b_desc, c_desc, part_ptr, ticket_ptr, M, N, K, tail, slices,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     NUM_SMS: tl.constexpr, EPI_SPLIT: tl.constexpr, OUT_DTYPE: tl.constexpr,
                     SLICED: tl.constexpr):
    """The whole rounds of the persistent walk, then the last `tail` tiles, each in `slices` K-slices (the host's
    `_last_round`); without SLICED (slices 1) the slot and ticket code is not built."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    whole = num_pid_m * num_pid_n - tail
    for tile_id in tl.range(tl.program_id(0), whole, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = _tile_sum(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_tiles, BLOCK_M, BLOCK_N, BLOCK_K)
        _store_tile(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N, EPI_SPLIT, OUT_DTYPE)
    unit = tl.program_id(0)
    if unit < tail * slices:
        t = unit // slices
        s = unit % slices
        pid_m, pid_n = _tile_coords(whole + t, num_pid_m, num_pid_n, GROUP_M)
        per = tl.cdiv(k_tiles, slices)
        acc = _tile_sum(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, s * per, tl.minimum(k_tiles, s * per + per),
                        BLOCK_M, BLOCK_N, BLOCK_K)
        if not SLICED:
            _store_tile(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N, EPI_SPLIT, OUT_DTYPE)
        else:
            # Each slice leaves its fp32 sum in a slot of its own and takes a ticket; the slice that takes the
            # tile's last ticket adds the slots in slice order (the same bits whichever slice ends last) and stores
            # the tile. The barrier puts every thread's slot store before the ticket (a release at GPU scope); the
            # acquire puts the other slices' stores before the loads, which bypass L1 (.cg). No program waits.
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
                _store_tile(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N, EPI_SPLIT, OUT_DTYPE)


@triton.jit
def _gemm_ptr_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     NUM_SMS: tl.constexpr, INT64: tl.constexpr, OUT_DTYPE: tl.constexpr):
    """The unaligned path: the same persistent walk with pointer loads (K tail masked, M/N wrapped)."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        if INT64:
            offs_m = offs_m.to(tl.int64)
            offs_n = offs_n.to(tl.int64)
            offs_k = offs_k.to(tl.int64)
        a_ptrs = a_ptr + (offs_m % M)[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + (offs_n % N)[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(OUT_DTYPE), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _gemm_splitk_kernel(a_desc, b_desc, c_desc, w_ptr, M, N, K, k_tiles_per_split,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                        OUT_DTYPE: tl.constexpr, PDL: tl.constexpr):
    """Few rows (decode): one program per (tile of C, slice of K), not persistent. With SPLIT, each writes its fp32
    partial sum to slice pid_s of the workspace w (S x M x N) and _splitk_reduce adds the slices in order. With PDL
    the reduce is launched as soon as every program here has started (programmatic dependent launch): its programs
    wait on the device, not on a launch, for this grid to end."""
    if PDL:
        gdc_launch_dependents()
    num_pid_m = tl.cdiv(M, BLOCK_M)
    pid_m = tl.program_id(0) % num_pid_m                     # row tiles of one column adjacent: B read once
    pid_n = tl.program_id(0) // num_pid_m
    pid_s = tl.program_id(1)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    k_first = pid_s * k_tiles_per_split
    k_last = tl.minimum(k_first + k_tiles_per_split, tl.cdiv(K, BLOCK_K))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_first, k_last):
        a = a_desc.load([off_m, ki * BLOCK_K])
        b = b_desc.load([ki * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    if SPLIT:
        offs_m = (off_m + tl.arange(0, BLOCK_M)).to(tl.int64)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        w = w_ptr + pid_s.to(tl.int64) * M * N + offs_m[:, None] * N + offs_n[None, :]
        tl.store(w, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    else:
        c_desc.store([off_m, off_n], acc.to(OUT_DTYPE))


@triton.jit
def _splitk_reduce(w_ptr, c_ptr, MN, S, BLOCK: tl.constexpr, OUT_DTYPE: tl.constexpr, PDL: tl.constexpr):
    """c = sum over s of w[s] (fp32, in order s = 0, 1, ...), rounded once to the output dtype. With PDL it may
    start before the split-K grid ends: `gdc_wait` holds every load until that grid has ended and its stores show."""
    if PDL:
        gdc_wait()
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(S):
        acc += tl.load(w_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(OUT_DTYPE), mask=mask)


@functools.lru_cache(maxsize=None)
def _card(device):
    """(SM count, shared memory per SM in bytes): the configs follow the card they run on."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return props.multi_processor_count, getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)
    return 132, 228 * 1024  # the CPU interpreter: pretend H100, so it walks tiles as an H100 would


@functools.lru_cache(maxsize=None)
def _pdl(device):
    """Programmatic dependent launch: Hopper (sm_90) and later; not the CPU interpreter, which has no launch."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9


def _p2(x, lo):
    return max(lo, triton.next_power_of_2(max(1, x)))


def _config(M, N, K, tma, n_sm):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, EPI_SPLIT).

    Large tiles: 128x256x64 with 8 warps (two consumer warpgroups, 64x256 of C each, wgmma), 4 stages of 48 KiB
    plus the 32 KiB split store buffer (224 KiB of H100's 227). Too few tiles for the SMs (M = 128 decode): halve
    N, then M, not below 64, as triton_tiled.py does. Unaligned shapes: 128x128x32 (per-element addresses)."""
    if not tma:
        bm, bn, bk = 128, 128, 32
    else:
        bm, bn, bk = 128, 256, 64
    bm = min(bm, _p2(M, 16))
    bn = min(bn, _p2(N, 16))
    bk = min(bk, _p2(K, 16))
    while triton.cdiv(M, bm) * triton.cdiv(N, bn) < n_sm:
        if bn > 64 and bn >= bm:
            bn //= 2
        elif bm > 64:
            bm //= 2
        else:
            break
    num_warps = 8 if bm * bn >= 128 * 128 else 4
    if not tma:
        return bm, bn, bk, num_warps, 3, False
    split = bn >= 128
    stage = (bm + bn) * bk * 2
    staging = bm * (bn // 2 if split else bn) * 2
    num_stages = max(2, min(4, (220 * 1024 - staging) // stage))
    return bm, bn, bk, num_warps, num_stages, split


_MAX_SLICES = 8     # K-slices per tile of a short last round (_last_round)


def _last_round(tiles, k_tiles, programs):
    """(tiles left after the whole rounds, K-slices for each of them) on the persistent walk.

    A round gives each program one tile. When the tiles left after the whole rounds would keep at most half the
    programs busy while the rest idle for a whole tile's K loop, each is cut into as many K-slices as give every
    program one, at most _MAX_SLICES and at least 4 K-steps each (16384 x 7168 x 2048 on 132 SMs: 3584 tiles of
    128 x 256, 27 whole rounds and 20 tiles in 6 slices). Otherwise 1: the last round runs whole. The kernel takes
    both as arguments, so this is the one place the rule lives; it also decides whether slots and tickets are
    needed."""
    tail = tiles % programs
    if tail == 0 or 2 * tail > programs:
        return tail, 1
    return tail, max(1, min(programs // tail, _MAX_SLICES, k_tiles // 4))


def _splitk_config(M, N, K, n_sm, smem):
    """Few rows (M <= 256, TMA-aligned): (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, S), S slices of K.

    Decode is bound by reading B once; what matters is that every SM streams its share of it with loads in flight.
    Tiles of 64 rows x 128 columns, 4 stages of 64 K each (96 KiB: two programs per SM of 228 KiB) and 4 warps held
    at every few-row shape measured (see the module docstring); 128-row tiles took one program per SM and lost up
    to 2x at M = 256. Tiles of C alone cannot always fill the card (M = 128, N = 4096: 64 tiles), so K is cut into S
    slices, as many as the SMs hold at once (SM count x programs per SM, from the card), one wave. A split costs a
    second kernel and S fp32 copies of C, so tiles that already give half the SMs a program are not split.
    Where 128 x 128 tiles number more than half the SMs and at most all of them (M = 128, N = 14336: 112 tiles for
    132 SMs), those take the card instead, one program an SM with 5 stages of 64 K (160 KiB): each SM streams a
    wider panel of B with more bytes in flight, and no second wave is left over."""
    stage128 = (128 + 128) * 64 * 2
    tiles128 = triton.cdiv(M, 128) * triton.cdiv(N, 128)
    if M >= 128 and n_sm < 2 * tiles128 <= 2 * n_sm and K >= 4 * 64 and smem >= 5 * stage128 + 8 * 1024:
        return 128, 128, 64, 4, 5, 1
    bm = min(64, _p2(M, 16))
    bn = min(128, _p2(N, 16))
    bk = min(64, _p2(K, 16))
    num_stages = 4
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    k_tiles = triton.cdiv(K, bk)
    per_sm = max(1, smem // ((bm + bn) * bk * 2 * num_stages + 1024))
    S = 1
    if 2 * tiles <= n_sm:
        S = max(1, min(n_sm * per_sm // tiles, k_tiles // 4, 16))
    return bm, bn, bk, 4, num_stages, S


def _splitk(a, b, c, card, config=None):
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk, num_warps, num_stages, S = config or _splitk_config(M, N, K, *card)
    k_tiles = triton.cdiv(K, bk)
    per = triton.cdiv(k_tiles, S)
    S = triton.cdiv(k_tiles, per)                       # no empty slice
    out_dtype = _TORCH_TO_TL[a.dtype]
    a_desc = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk])
    b_desc = TensorDescriptor(b, [K, N], [b.stride(0), 1], [bk, bn])
    c_desc = TensorDescriptor(c, [M, N], [N, 1], [bm, bn])
    w = torch.empty((S, M, N), dtype=torch.float32, device=a.device) if S > 1 else c
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), S)
    pdl = S > 1 and _pdl(a.device)
    _gemm_splitk_kernel[grid](a_desc, b_desc, c_desc, w, M, N, K, per, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                              SPLIT=S > 1, OUT_DTYPE=out_dtype, PDL=pdl, num_warps=num_warps, num_stages=num_stages)
    if S > 1:
        _splitk_reduce[(triton.cdiv(M * N, 1024),)](w, c, M * N, S, BLOCK=1024, OUT_DTYPE=out_dtype, PDL=pdl,
                                                    num_warps=4, launch_pdl=pdl)
    return c


def solve(a, b):
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], (tuple(a.shape), tuple(b.shape))
    assert a.dtype == b.dtype and a.dtype in _TORCH_TO_TL, (a.dtype, b.dtype)
    assert a.device == b.device, (a.device, b.device)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    esize = a.element_size()
    tma = (a.stride(1) == 1 and b.stride(1) == 1 and all(t.data_ptr() % 16 == 0 for t in (a, b, c))
           and (a.stride(0) * esize) % 16 == 0 and (b.stride(0) * esize) % 16 == 0 and (N * esize) % 16 == 0)
    card = _card(a.device)
    n_sm = card[0]
    # Triton launches on the current device
    with torch.cuda.device(a.device) if a.is_cuda else contextlib.nullcontext():
        if tma and M <= 256:
            return _splitk(a, b, c, card)
        bm, bn, bk, num_warps, num_stages, split = _config(M, N, K, tma, n_sm)
        grid = (min(n_sm, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
        out_dtype = _TORCH_TO_TL[a.dtype]
        if tma:
            a_desc = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk])
            b_desc = TensorDescriptor(b, [K, N], [b.stride(0), 1], [bk, bn])
            c_desc = TensorDescriptor(c, [M, N], [N, 1], [bm, bn // 2 if split else bn])
            # A grid smaller than the card (fewer tiles than SMs) has no tail: each program takes one tile.
            tail, slices = _last_round(triton.cdiv(M, bm) * triton.cdiv(N, bn), triton.cdiv(K, bk), grid[0])
            if slices > 1:      # fp32 slots for the last round's slices (one a program), a ticket a tile
                part = torch.empty((grid[0], bm * bn), dtype=torch.float32, device=a.device)
                tickets = torch.zeros(tail, dtype=torch.int32, device=a.device)
            else:               # placeholders, never touched: no memset where nothing is sliced
                part = torch.empty(1, dtype=torch.float32, device=a.device)
                tickets = torch.empty(1, dtype=torch.int32, device=a.device)
            _gemm_tma_kernel[grid](a_desc, b_desc, c_desc, part, tickets, M, N, K, tail, slices, BLOCK_M=bm,
                                   BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, NUM_SMS=n_sm, EPI_SPLIT=split,
                                   OUT_DTYPE=out_dtype, SLICED=slices > 1, num_warps=num_warps,
                                   num_stages=num_stages)
        else:
            int64 = max(a.numel(), b.numel(), c.numel()) >= 2**31
            _gemm_ptr_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                   c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                   NUM_SMS=n_sm, INT64=int64, OUT_DTYPE=out_dtype, num_warps=num_warps,
                                   num_stages=num_stages)
    return c

