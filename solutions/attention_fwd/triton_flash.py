"""FlashAttention-2-style fused attention forward in Triton: online softmax, fp32 accumulators, GQA packed into the
row dimension, bottom-right causal masking, split-KV (flash-decoding) when the queries alone cannot fill the GPU.

Why it looks the way it does:
- GQA packed into rows. The G query heads sharing kv head j become the rows r = s * G + g (query position major)
  of one (Sq*G, D) problem against K_j, V_j; the grid is (row tiles) x (B * Hkv) [x KV splits]. Every K/V block a
  program loads serves all G heads, so K and V are read once per kv head, not G times (decode: 4 query heads share
  each block). Position-major order keeps a tile's query positions contiguous (BLOCK_M / G of them), so the causal
  bounds of a tile stay as tight as without packing.
- Online softmax in base 2: scores = q.k * (scale * log2 e) in fp32, running max m and sum l per row, acc rescaled
  by exp2(m_old - m_new). The probabilities are rounded to the input dtype only as the operand of the P V tensor-core
  product (as FlashAttention does); l is summed from the fp32 values. O = acc / l at the end, one rounding.
  The scale is applied inside the exponent, p = exp2(q.k * c - m), one fused multiply-add an element, and the row
  max is taken of the raw q.k and scaled once (c > 0, so it is the same max): scaling the whole tile first costs a
  multiply an element more, which the softmax warps feel most at D = 64 (the largest share of non-MMA work).
- The rescale of acc is done at every block: rescaling only when a row's max grows by more than 2**8 (exact, since
  acc, l and m stay consistent) puts a branch in the loop, and Triton 3.6 then no longer overlaps the loop's MMAs.
- Bottom-right causal: row at position s sees keys j <= s + Sk - Sq. Each tile splits its key range in two loops:
  blocks every row of the tile fully sees (no mask work at all), then the few blocks on the diagonal and the Sk tail,
  masked. Blocks past the last visible key of the tile are never loaded. Tiles are issued last-rows-first (the
  heaviest under the causal mask) so the tail of the grid is short.
- Rows with no visible key (Sq > Sk, causal): m stays -inf; the masked loop guards exp2(-inf - -inf) by using 0 as
  the max, so p = 0, l = 0, and the epilogue writes 0 (the problem's definition) instead of 0/0.
- Split-KV. When the row tiles x kv heads do not fill the SMs (decode: G*Sq = 4 rows per kv head, so B*Hkv programs,
  8 at batch 1, each streaming a whole K and V), the key range is cut into splits of whole blocks; each writes its
  unnormalized fp32 acc with its m and l, and a small second kernel merges them (rescaling each by exp2(m_i - max)),
  guarding splits that saw no key. Prefill-sized grids do not split. The merge loads a tile of up to 16 splits at
  once (`_merge_config`), so their loads are in flight together: merging one split at a time waits one memory round
  trip per split, and at 16 splits that took longer than the attention kernel itself. The merge is launched with
  programmatic dependent launch (Hopper): the attention programs let it launch as they start, and its programs wait
  on the device (`gdc_wait`) for the attention grid to end, so no launch gap sits between the two (2 to 10% of a
  decode call on an H200).
- Tiles: D = 64: 64x64 blocks, 4 warps; D = 128: 128x64 (the S tile and the fp32 acc of 128 rows share the
  registers of 8 warps); 3 stages. Few rows (decode) take 16-64-row tiles, 4 warps, and 32 KB of K+V a stage (128
  keys at D = 64, 64 at D = 128), so 3 stages stay far inside shared memory. Rows past Sq*G are clamped for loads
  and dropped at the store; key blocks past Sk are masked (other=0: never out of bounds, never NaN into the P V
  product). Batch/head offsets are int64. No autotuning.

How the tiles and splits were chosen: config sweeps (scripts/sweep_configs.py --only attention, do_bench against
SDPA on the same inputs), then Gauntlet's judgements; the figures are in docs/benchmarks.md ("Figures moved from
docstrings", attention_fwd/triton_flash, and the dated entries after it). What they showed:
- D = 64 with 128x128 tiles and 8 warps was the main loss: 64x64 with 4 warps runs 1.2x-1.4x faster there (more
  programs resident per SM, and the 64-wide S tile is one wgmma per warpgroup); 128x64 with 8 warps was close at
  4096x4096 and worse at short sequences. At D = 128, 128x64 with 8 warps stayed best (64x64, 128x128 with 2
  stages and 4 warps all slower).
- Decode: one split per SM; 2 or 4 made programs too short to amortise their set-up and the merge.
- What is left at D = 128 prefill is cuDNN's FlashAttention-3-style kernel (warp-specialised producer and consumer
  warpgroups, ping-pong softmax). Triton 3.6 does not produce it for Hopper: `tl.range(..., warp_specialize=True)`
  on the key loop compiled at the 8-warp D = 128 tile and changed nothing, and failed to compile at the 4-warp
  D = 64 tile.
- Where it stands against its floors (Nsight Compute on an H200, scripts/profile_case.py; figures and the command
  in docs/benchmarks.md, 2026-11-29):
  - Decode, one 8k sequence: the attention kernel reads K and V once (33.6 MB, the same bytes as cuDNN's kernel)
    at 43% of DRAM peak where cuDNN reaches 48%: 128 programs of 4 warps cannot keep more loads in flight. The
    merge, one split at a time, took longer than that kernel; a tile of splits at once cut it about 4x and moved
    Gauntlet's ratio from 0.75x to 0.99x. Config sweeps had not helped (blocks of 32-128 keys, 2-4 stages, 2 or
    4 warps, 8-528 programs).
  - Prefill at D = 128 (about 0.885x): compute-bound in both. cuDNN's kernel is persistent (one CTA of three
    warpgroups per SM) at 58% of the SMs' throughput; this one runs 7.8 waves of one 8-warp CTA per SM (231
    registers a thread) at 49%. Closing it needs producer/consumer warpgroups and overlapped softmax, which
    Triton 3.6 does not generate for Hopper.
  - BERT-base (D = 64, 512 keys, about 0.89x): not memory-bound (both kernels read the same 75.5 MB at about 20% of
    DRAM peak). This one runs 5.8 waves of 4-warp CTAs, four an SM, at 6.8 cycles an issued instruction; cuDNN's is
    persistent (132 CTAs of three warpgroups) at 4.8, and takes 0.89 of this kernel's time under Nsight Compute.
    The same missing overlap of softmax and MMAs.
"""
import functools
import math

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

BACKEND = "triton"

_TORCH_TO_TL = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}
_LOG2E = 1.4426950408889634


@triton.jit
def _attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, m_ptr, l_ptr,
                     Hkv, G, Sq, Sk, M, keys_per_split, qk_scale,
                     sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svk, svd, sob, soh, sos, sod,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr,
                     SPLIT: tl.constexpr, OUT_DTYPE: tl.constexpr, PDL: tl.constexpr):
    if PDL:             # the merge may launch now; it waits on the device for this grid to end (`_merge_kernel`)
        gdc_launch_dependents()
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)        # heaviest (last) causal tiles first
    pid_bh = tl.program_id(1)
    pid_s = tl.program_id(2)
    b = (pid_bh // Hkv).to(tl.int64)
    hkv = (pid_bh % Hkv).to(tl.int64)

    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)               # packed row r = pos * G + g
    rw = tl.minimum(r, M - 1)                                  # rows past M load row M-1; the store drops them
    pos = rw // G
    head = hkv * G + (rw % G).to(tl.int64)
    d = tl.arange(0, D)
    q_rows = q_ptr + b * sqb + head * sqh + pos.to(tl.int64) * sqs
    q = tl.load(q_rows[:, None] + d[None, :] * sqd)
    k_base = k_ptr + b * skb + hkv * skh
    v_base = v_ptr + b * svb + hkv * svh

    kv_lo = pid_s * keys_per_split
    kv_hi = tl.minimum(Sk, kv_lo + keys_per_split)
    if CAUSAL:
        first_pos = (pid_m * BLOCK_M) // G
        last_pos = tl.minimum((pid_m * BLOCK_M + BLOCK_M - 1) // G, Sq - 1)
        full_hi = tl.minimum(kv_hi, tl.maximum(kv_lo, first_pos + Sk - Sq + 1))   # keys every row sees
        kv_hi = tl.minimum(kv_hi, tl.maximum(kv_lo, last_pos + Sk - Sq + 1))     # keys some row sees
    else:
        full_hi = kv_hi
    mask_lo = kv_lo + ((full_hi - kv_lo) // BLOCK_N) * BLOCK_N
    last_key = pos + (Sk - Sq)                                 # per row: the last key it may see

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)

    # Blocks every row of the tile sees in full: no masks.
    for start in range(kv_lo, mask_lo, BLOCK_N):
        kk = start + offs_n
        k = tl.load(k_base + kk[:, None] * sks + d[None, :] * skd)
        s = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        p = tl.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + kk[:, None] * svk + d[None, :] * svd)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    # The causal diagonal, the end of the keys and of the split: masked.
    for start in range(mask_lo, kv_hi, BLOCK_N):
        kk = start + offs_n
        live = kk < kv_hi
        k = tl.load(k_base + kk[:, None] * sks + d[None, :] * skd, mask=live[:, None], other=0.0)
        s = tl.where(live[None, :], tl.dot(q, tl.trans(k)), float("-inf"))
        if CAUSAL:
            s = tl.where(kk[None, :] <= last_key[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)   # a row that has seen no key yet: p = 0, not NaN
        p = tl.exp2(s * qk_scale - m_use[:, None])
        alpha = tl.exp2(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + kk[:, None] * svk + d[None, :] * svd, mask=live[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    if SPLIT:
        # Workspaces laid out (split, B*Hkv, M[, D]) in packed-row order; the merge kernel reads them back.
        row = (pid_s * tl.num_programs(1) + pid_bh).to(tl.int64) * M + r
        live_row = r < M
        tl.store(m_ptr + row, m_i, mask=live_row)
        tl.store(l_ptr + row, l_i, mask=live_row)
        tl.store(o_ptr + row[:, None] * D + d[None, :], acc, mask=live_row[:, None])
    else:
        out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]     # rows with no key: acc = 0, output 0
        o_rows = o_ptr + b * sob + head * soh + pos.to(tl.int64) * sos
        tl.store(o_rows[:, None] + d[None, :] * sod, out.to(OUT_DTYPE), mask=(r < M)[:, None])


@triton.jit
def _merge_kernel(acc_ptr, m_ptr, l_ptr, o_ptr, Hkv, G, M, n_splits, split_rows,
                  sob, soh, sos, sod,
                  BLOCK_M: tl.constexpr, SPLITS: tl.constexpr, D: tl.constexpr, OUT_DTYPE: tl.constexpr,
                  PDL: tl.constexpr):
    # Launched with PDL, the merge's programs start while the attention grid still runs; `gdc_wait` holds them
    # until that grid has ended and its partials show.
    if PDL:
        gdc_wait()
    # A (SPLITS, BLOCK_M, D) tile of partials is loaded at once, so its loads are in flight together: a loop of one
    # split at a time waits out one memory round trip per split.
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // Hkv).to(tl.int64)
    hkv = (pid_bh % Hkv).to(tl.int64)
    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rw = tl.minimum(r, M - 1)
    d = tl.arange(0, D)
    sp = tl.arange(0, SPLITS)
    row = pid_bh.to(tl.int64) * M + rw
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    for s0 in range(0, n_splits, SPLITS):
        s = s0 + sp
        ok = (s < n_splits)[:, None]
        at = row[None, :] + s.to(tl.int64)[:, None] * split_rows                # (SPLITS, BLOCK_M)
        m_s = tl.load(m_ptr + at, mask=ok, other=float("-inf"))
        l_s = tl.load(l_ptr + at, mask=ok, other=0.0)
        a_s = tl.load(acc_ptr + at[:, :, None] * D + d[None, None, :], mask=ok[:, :, None], other=0.0)
        m_new = tl.maximum(m, tl.max(m_s, 0))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)   # no split saw a key yet: weights 0, not NaN
        alpha = tl.exp2(m - m_use)
        beta = tl.exp2(m_s - m_use[None, :])
        l = l * alpha + tl.sum(l_s * beta, 0)
        acc = acc * alpha[:, None] + tl.sum(a_s * beta[:, :, None], 0)
        m = m_new
    out = acc / tl.where(l > 0.0, l, 1.0)[:, None]
    pos = (rw // G).to(tl.int64)
    head = hkv * G + (rw % G).to(tl.int64)
    o_rows = o_ptr + b * sob + head * soh + pos * sos
    tl.store(o_rows[:, None] + d[None, :] * sod, out.to(OUT_DTYPE), mask=(r < M)[:, None])


@functools.lru_cache(maxsize=None)
def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # interpreter on the CPU: pretend H100, so it runs the configs (and splits) an H100 would


@functools.lru_cache(maxsize=None)
def _pdl(device):
    """Programmatic dependent launch for the merge: Hopper (sm_90) and later; not the CPU interpreter."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9


def _config(M, D):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages); see the module docstring."""
    if M <= 64:                                   # decode-like: few rows, stream long key blocks (32 KB a stage)
        return max(16, triton.next_power_of_2(M)), (128 if D <= 64 else 64), 4, 3
    if D <= 64:
        return 64, 64, 4, 3
    return 128, 64, 8, 3


def _splits(M, bm, tiles, n_blocks, n_sm):
    """How many KV splits: only when the row tiles leave SMs idle (see the module docstring), about one program
    per SM, at least 2 key blocks per split."""
    if n_blocks >= 4 and (tiles < n_sm if M <= bm else 2 * tiles <= n_sm):
        return min(triton.cdiv(n_sm, tiles), n_blocks // 2)
    return 1


def _merge_config(M, D, splits, device):
    """(BLOCK_M, SPLITS) of the merge's tile: up to 16 splits at once and 4096 partial values a program (32 fp32
    registers a thread at 4 warps), so small-M merges still spread over many programs. The interpreter pays per
    program, not per register: there it takes 64 rows at a time."""
    sp = min(triton.next_power_of_2(splits), 16 if device.type == "cuda" else 8)
    if device.type != "cuda":
        return min(64, triton.next_power_of_2(M)), sp
    return max(1, min(triton.next_power_of_2(M), 4096 // (sp * D))), sp


def solve(q, k, v, causal):
    assert q.dim() == 4 and k.shape == v.shape and q.dtype == k.dtype == v.dtype and q.dtype in _TORCH_TO_TL
    B, Hq, Sq, D = q.shape
    Bk, Hkv, Sk, Dk = k.shape
    assert B == Bk and D == Dk and Hq % Hkv == 0 and D >= 16 and D & (D - 1) == 0, (q.shape, k.shape)
    G = Hq // Hkv
    M = Sq * G
    causal = bool(causal)
    bm, bn, num_warps, num_stages = _config(M, D)
    tiles = triton.cdiv(M, bm) * B * Hkv
    n_blocks = triton.cdiv(Sk, bn)
    n_sm = _sm_count(q.device)
    splits = _splits(M, bm, tiles, n_blocks, n_sm)
    keys_per_split = triton.cdiv(n_blocks, splits) * bn
    splits = triton.cdiv(Sk, keys_per_split)

    out = torch.empty((B, Hq, Sq, D), dtype=q.dtype, device=q.device)
    out_tl = _TORCH_TO_TL[q.dtype]
    qk_scale = _LOG2E / math.sqrt(D)
    if splits > 1:
        acc_ws = torch.empty((splits, B * Hkv, M, D), dtype=torch.float32, device=q.device)
        m_ws = torch.empty((splits, B * Hkv, M), dtype=torch.float32, device=q.device)
        l_ws = torch.empty_like(m_ws)
        dst = acc_ws
    else:
        dst = m_ws = l_ws = out
    pdl = splits > 1 and _pdl(q.device)
    launches = [(_attn_fwd_kernel, (triton.cdiv(M, bm), B * Hkv, splits),
                 (q, k, v, dst, m_ws, l_ws, Hkv, G, Sq, Sk, M, keys_per_split, qk_scale,
                  *q.stride(), *k.stride(), *v.stride(), *out.stride()),
                 dict(BLOCK_M=bm, BLOCK_N=bn, D=D, CAUSAL=causal, SPLIT=splits > 1, OUT_DTYPE=out_tl, PDL=pdl,
                      num_warps=num_warps, num_stages=num_stages))]
    if splits > 1:
        mbm, msp = _merge_config(M, D, splits, q.device)
        launches.append((_merge_kernel, (triton.cdiv(M, mbm), B * Hkv),
                         (acc_ws, m_ws, l_ws, out, Hkv, G, M, splits, B * Hkv * M, *out.stride()),
                         dict(BLOCK_M=mbm, SPLITS=msp, D=D, OUT_DTYPE=out_tl, PDL=pdl, num_warps=4,
                              launch_pdl=pdl)))
    for kernel, grid, args, meta in launches:
        if q.is_cuda and q.device.index != torch.cuda.current_device():
            with torch.cuda.device(q.device):
                kernel[grid](*args, **meta)
        else:
            kernel[grid](*args, **meta)
    return out
