"""Known-good (problem grouped_gemm_moe, judged by tests/test_allowlist.py): an honest variant of
solutions/grouped_gemm_moe/triton_grouped.py whose routing glue is written the way MoE wrappers write it, in torch
around the Triton kernel: the expert of each row from the offsets (torch.searchsorted), the rows per expert
(torch.bincount), each expert's first row (offs - torch.diff(offs)), and the experts ordered busiest first
(torch.argsort, stable) so the longest experts' tiles start first. The kernel walks the experts in that order; the
GEMM itself is all in the kernel. The CPU allowlist used to refuse aten::diff, bincount, searchsorted and argsort
(forbidden_op on the CPU only: the GPU's kernel-name allowlist took their kernels), so this file was falsely
rejected on the CPU. Expected: pass (on both devices: harness/judge/process/kernels.py GLUE_FAMILIES)."""
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
def _grouped_gemm_kernel(x_ptr, w_ptr, starts_ptr, ends_ptr, order_ptr, out_ptr, M, N, K, E, NUM_M_TILES,
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

    # Device-side schedule over the experts in the host's order (busiest first): which slot owns m-tile pid_m.
    eidx = tl.arange(0, E_P2)
    ends = tl.load(ends_ptr + eidx, mask=eidx < E, other=0)
    starts = tl.load(starts_ptr + eidx, mask=eidx < E, other=0)
    tiles = (ends - starts + (BLOCK_M - 1)) // BLOCK_M          # 0 for empty experts and the E_P2 padding
    before = tl.cumsum(tiles, axis=0) <= pid_m                   # slots whose tiles all come before pid_m
    slot = tl.sum(before.to(tl.int32), axis=0)                   # so pid_m belongs to slot `slot`
    if slot >= E:
        return                                                   # past the real tile count: nothing to do
    first_tile = tl.sum(tl.where(before, tiles, 0), axis=0)
    row_end = tl.load(ends_ptr + slot)
    row_start = tl.load(starts_ptr + slot)
    e = tl.load(order_ptr + slot)

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
    offs = offs.to(torch.int64)
    # Routing glue, as MoE wrappers write it (all on the device, no host sync).
    expert_of_row = torch.searchsorted(offs, torch.arange(M, device=x.device), right=True)
    counts = torch.bincount(expert_of_row, minlength=E)[:E]
    starts = offs - torch.diff(offs, prepend=offs.new_zeros(1))
    order = torch.argsort(counts, descending=True, stable=True)
    starts_o = starts[order].to(torch.int32).contiguous()
    ends_o = offs[order].to(torch.int32).contiguous()
    order = order.to(torch.int32).contiguous()
    aligned = all(t.stride(-2) % 8 == 0 and t.data_ptr() % 16 == 0 for t in (x, w)) and x.stride(1) == 1 \
        and w.stride(2) == 1
    bm, bn, bk, num_warps, num_stages = _config(M, N, K, E, aligned, _sm_count(x.device))
    m_tiles = triton.cdiv(M, bm) + min(E, M)
    int64 = max(x.numel(), N * K, out.numel()) >= 2**31
    grid = (m_tiles * triton.cdiv(N, bn),)
    args = (x, w, starts_o, ends_o, order, out, M, N, K, E, m_tiles,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), w.stride(2), out.stride(0), out.stride(1))
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, E_P2=_p2(E, 64), EVEN_K=(K % bk == 0),
                INT64=int64, OUT_DTYPE=_TORCH_TO_TL[x.dtype], num_warps=num_warps, num_stages=num_stages)
    if x.is_cuda and x.device.index != torch.cuda.current_device():
        with torch.cuda.device(x.device):  # Triton launches on the current device
            _grouped_gemm_kernel[grid](*args, **meta)
    else:
        _grouped_gemm_kernel[grid](*args, **meta)
    return out
