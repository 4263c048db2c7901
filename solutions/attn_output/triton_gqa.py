"""Attention output in Triton: O = P @ V with the GQA head mapping done in the kernel (no expanded V), split-K
when the output alone cannot fill the GPU.

Why it looks the way it does:
- GQA as one GEMM per kv head. The G query heads that share kv head j are rows r = g * Sq + s of a (G*Sq, Sk)
  matrix P_j; their outputs are P_j @ V_j. The grid is (row tiles) x (B * Hkv) [x splits], every V tile a program
  loads serves all G heads of its rows, and V is never copied. For decode (Sq = 1) that reads V once, not G times.
- N is the head dim (64 or 128): one tile spans all of it, so each program reads its rows of P exactly once.
  Sk is the reduction: 128-row tiles, BLOCK_K = 64 keys per step, 3 stages, 8 warps, fp32 accumulator (ptxas for
  sm_90: ~125 registers, no spills). Full K-blocks load without masks; the one partial block at the end is masked
  (other=0 on both P and V: keys past Sk add nothing and never read out of bounds).
- Unaligned P rows (Sk not a multiple of 16): Triton can't vectorize the P loads and keeps a 64-bit address per
  element; BLOCK_K = 64 then takes ~235 registers at D = 128, BLOCK_K = 32 stays at ~128.
- Split-K. Decode has G*Sq = 4 rows per kv head, so without a split there are only B*Hkv programs (8 at batch 1)
  each streaming all of V: a handful of SMs pulling on memory. When the tiles do not cover the SMs, the keys are
  cut into splits of whole K-blocks (about two waves of programs, each split at least two blocks); each split
  writes an fp32 partial and torch sums the partials (fp32) and rounds once. Adding fp32 partials reorders the
  fp32 sum, nothing more.
- Rows past G*Sq are wrapped (% M) for the loads and dropped by the masked store. Head/batch offsets are int64.
- fp32 inputs under torch's "highest" precision use input_precision="ieee" (no TF32): FMA on CUDA cores, a
  64-row tile, BLOCK_K = 32 and 4 warps: the best of five in a sweep on an H200 (scripts/sweep_tiled.py; figures in
  docs/benchmarks.md), 1.1-1.2x the 64x16 step on 8 warps of before at the prefill shapes. Where it stays short
  of cuBLAS's SGEMM (the GQA prefill shapes, ~0.86x): both are compute-bound (Nsight Compute, docs/benchmarks.md:
  11-14% of DRAM bandwidth); cuBLAS's 128x128x8 kernel keeps its SMs 91% busy at 2.1 cycles an issued instruction,
  this one 75% at 3.7 (168 registers, 4 warps). FMA tiles read A (P) fastest M-major and P arrives
  keys-contiguous, but a copy of P would move 4 GB more at the 4k shape (over 1 ms at the card's bandwidth, next
  to a product of 3-4 ms), where gemm_layouts' copied A is small beside its GEMM: not tried.
- Sq is never specialized (do_not_specialize): when Sq is a multiple of 16, Triton 3.6's alignment analysis
  carries the 16-divisibility of `rw % Sq` through `pos * stride` even where the row stride is odd, vectorizes
  the row accesses and faults with "misaligned address" (seen on an H100: B=1, Hkv=2, G=8, Sq=48, Sk=8897,
  D=128, bf16). Unspecialized, `pos` has no claimed alignment, and neither do the rows it addresses.
- No autotuning; configs are reasoned, not tuned on an H100.
"""
import functools

import torch
import triton
import triton.language as tl

BACKEND = "triton"

_TORCH_TO_TL = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


@triton.jit(do_not_specialize=["Sq"])
def _pv_kernel(p_ptr, v_ptr, o_ptr, Hkv, G, Sq, Sk, M, keys_per_split, ws_split_stride,
               spb, sph, sps, spk, svb, svh, svk, svd, sob, soh, sos, sod,
               BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, D: tl.constexpr,
               INPUT_PRECISION: tl.constexpr, OUT_DTYPE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    pid_s = tl.program_id(2)
    b = (pid_bh // Hkv).to(tl.int64)
    hkv = (pid_bh % Hkv).to(tl.int64)

    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)          # row of the per-kv-head GEMM: r = g * Sq + s
    rw = r % M
    head = hkv * G + (rw // Sq).to(tl.int64)
    pos = (rw % Sq).to(tl.int64)
    p_rows = p_ptr + b * spb + head * sph + pos * sps
    d = tl.arange(0, D)
    v_base = v_ptr + b * svb + hkv * svh

    k_lo = pid_s * keys_per_split
    k_hi = tl.minimum(Sk, k_lo + keys_per_split)
    n_full = (k_hi - k_lo) // BLOCK_K
    kk = k_lo + tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    for _ in range(n_full):
        p = tl.load(p_rows[:, None] + kk[None, :] * spk)
        v = tl.load(v_base + kk[:, None] * svk + d[None, :] * svd)
        acc = tl.dot(p, v, acc, input_precision=INPUT_PRECISION)
        kk += BLOCK_K
    if k_lo + n_full * BLOCK_K < k_hi:                     # the partial block at the end of the keys
        live = kk < k_hi
        p = tl.load(p_rows[:, None] + kk[None, :] * spk, mask=live[None, :], other=0.0)
        v = tl.load(v_base + kk[:, None] * svk + d[None, :] * svd, mask=live[:, None], other=0.0)
        acc = tl.dot(p, v, acc, input_precision=INPUT_PRECISION)

    # Unsplit: the output itself. Split: this split's fp32 partial, in a buffer laid out like the output.
    o_rows = o_ptr + pid_s.to(tl.int64) * ws_split_stride + b * sob + head * soh + pos * sos
    tl.store(o_rows[:, None] + d[None, :] * sod, acc.to(OUT_DTYPE), mask=(r < M)[:, None])


@functools.lru_cache(maxsize=None)
def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # interpreter on the CPU: pretend H100, so it runs the configs (and splits) an H100 would


def _config(M, dtype, aligned):
    """(BLOCK_M, BLOCK_K, num_warps); see the module docstring."""
    if dtype == torch.float32:
        bm, bk = 64, 32
    elif aligned:
        bm, bk = 128, 64
    else:
        bm, bk = 128, 32
    bm = min(bm, max(16, triton.next_power_of_2(M)))      # decode: G*Sq rows; 16 is tl.dot's minimum
    num_warps = 8 if bm >= 64 and dtype != torch.float32 else 4
    return bm, bk, num_warps


def solve(p, v):
    assert p.dim() == 4 and v.dim() == 4 and p.dtype == v.dtype and p.dtype in _TORCH_TO_TL
    B, Hq, Sq, Sk = p.shape
    Bv, Hkv, Skv, D = v.shape
    assert B == Bv and Sk == Skv and Hq % Hkv == 0 and D % 16 == 0 and D & (D - 1) == 0, (p.shape, v.shape)
    G = Hq // Hkv
    M = G * Sq
    if p.dtype != torch.float32:
        input_precision = None
    elif torch.get_float32_matmul_precision() == "highest":
        input_precision = "ieee"
    else:
        input_precision = "tf32"
    # Triton specializes on 16-divisible strides and 16-byte-aligned pointers: that is what lets it vectorize P.
    aligned = all(s % 16 == 0 for s in p.stride()[:-1]) and p.data_ptr() % 16 == 0
    bm, bk, num_warps = _config(M, p.dtype, aligned)

    tiles = triton.cdiv(M, bm) * B * Hkv
    n_blocks = triton.cdiv(Sk, bk)
    n_sm = _sm_count(p.device)
    splits = 1
    if tiles < n_sm and n_blocks >= 4:
        splits = min(triton.cdiv(2 * n_sm, tiles), n_blocks // 2)
    keys_per_split = triton.cdiv(n_blocks, splits) * bk
    splits = triton.cdiv(Sk, keys_per_split)

    out = torch.empty((B, Hq, Sq, D), dtype=p.dtype, device=p.device)
    if splits == 1:
        dst, ws_stride, out_tl = out, 0, _TORCH_TO_TL[p.dtype]
    else:
        dst = torch.empty((splits, B, Hq, Sq, D), dtype=torch.float32, device=p.device)
        ws_stride, out_tl = dst.stride(0), tl.float32
    grid = (triton.cdiv(M, bm), B * Hkv, splits)
    launch = _pv_kernel[grid]
    o_strides = dst.stride()[-4:]
    args = (p, v, dst, Hkv, G, Sq, Sk, M, keys_per_split, ws_stride, *p.stride(), *v.stride(), *o_strides)
    meta = dict(BLOCK_M=bm, BLOCK_K=bk, D=D, INPUT_PRECISION=input_precision, OUT_DTYPE=out_tl,
                num_warps=num_warps, num_stages=3)
    if p.is_cuda and p.device.index != torch.cuda.current_device():
        with torch.cuda.device(p.device):
            launch(*args, **meta)
    else:
        launch(*args, **meta)
    if splits > 1:
        torch.sum(dst, dim=0, out=out) if p.dtype == torch.float32 else out.copy_(dst.sum(dim=0))
    return out
