"""MoE grouped GEMM out[rows_e] = x[rows_e] @ w[e].T in NVIDIA's CuTe DSL for Hopper: TMA, WGMMA, warp
specialisation, persistent CTAs walking every expert's tiles in one launch.

The machinery of gemm/cute_ws.py (one producer warp feeding a ring of shared-memory stages through TMA, two
consumer warpgroups issuing wgmma on a 128 x BN tile), with the schedule of a grouped GEMM:

* Work units are (expert, N-tile, M-tile of the expert's rows), numbered expert by expert, N-tile-major inside an
  expert: consecutive units share a B tile (the expert's weights, read once per N-tile from HBM and then from L2).
  Each CTA takes units bid, bid + grid, ... and finds a unit's expert by binary search in the cumulative unit
  counts per expert, which each CTA computes first from the offsets into shared memory (2 KiB; ``_cumulate``): no
  host sync, so the timed call never waits on the offsets, and no launch before the kernel (eight small torch
  kernels computed them before: a share of a decode call, docs/benchmarks.md). The search's nine dependent reads
  stay in shared memory.
* x is one (M, K) K-major tensor: an expert's M-tile starts at its first row (any row, not a multiple of 128: TMA
  coordinates are per element). Rows past the expert's end are loaded and multiplied but never stored; rows past M
  read as zeros.
* w (E, N, K) is an (N, K, E) K-major tensor to TMA: the expert is the batch coordinate; no transposes.
* Epilogue: an M-tile wholly inside its expert goes out through shared memory and TMA stores (clipped at the
  matrix's edge); an expert's last, partial M-tile straight from registers, each element predicated on the
  expert's last row and on N (a TMA store clips only at the matrix's edge, not at an expert's).
* BN = 256 when N >= 2048 and K >= 4096, else 128 (short K leaves the epilogue a larger share).
* K and N must be multiples of 8 for TMA's 16-byte rows: other shapes are zero-padded on the device (exact).
* One compiled kernel per (dtype, BN, SM count); compilation happens in the first call (the judge's warm-up).

Notes (floor, measurement, what was tried)
------------------------------------------
* Floor: as for the dense GEMM (bf16 tensor cores about 989 TFLOP/s on an H100 SXM); the decode shapes are bound
  by reading the experts' weights (32 x 2048 x 7168 x 2 bytes = 940 MB at M = 1024: 0.31 ms at 3.0 TB/s).
* Measured on an H100 (2026-11-27). Right on 9 shapes x 2 dtypes of every routing (empty experts, one expert, 256
  experts, odd N and K; bitwise equal to torch._grouped_mm on six benchmark shapes), before and after the last
  change. In ``gauntlet run --device cuda`` at the defaults (bf16, seed 164: 40 fuzzed cases x 3 calls passed),
  against the baselines in the same judgement, all 14 benchmark shapes in problem.yaml's order, torch._grouped_mm:
  0.970 / 0.724 / 0.980 / 0.943 / 0.978 / 0.956 / 0.971 / 0.971 / 0.991 / 0.922 / 0.934 / 0.885 / 1.029 / 0.923
  (geomean 0.938x); the loop of cuBLAS calls 5.71x (1.24x to 58.7x). Issue 19 asks >= 1.1x: not met.
* What moved it: TMA stores for interior tiles and 128-wide tiles for short K (first version, every tile stored
  from registers, BN 256: 0.84 / 0.62 / 0.96 / 0.78 / 0.75 / 0.95 in a CUDA-event probe where the next read 0.973 /
  0.768 / 0.935 / 1.033 / 1.026 / 0.876); the cumulative counts in shared memory for the binary search: ncu showed
  the consumer warps stalled on the long scoreboard for 53% of their cycles at 32768 x 7168 x 2048 (nine dependent
  global loads per unit, by the producer and again by the consumers); judged, that shape went from 0.684 to 0.724
  and 0.727 (two runs) and 32768 x 1408 x 2048 from 0.900 to 0.922 and 0.932, the rest within 1%.
* Tried and not kept: the whole tile's epilogue behind two barriers (as fp8_gemm_blockwise/cute_blockwise.py): no
  faster here (0.716 against 0.739 at 32768 x 7168 x 2048 in one probe, the rest within 1%).
* The floor where 0.9 of the loop is not reached on an H200 (32768 x 7168 x 2048 and Mixtral's 8192 x 4096 x
  14336; docs/benchmarks.md, "The last round in K-slices"): Nsight Compute, clocks held, gives this kernel 1.85 ms
  against 1.77 ms for the loop's 32 cuBLAS kernels (cuBLAS picks a tile per expert, 128 x 152 to 256 x 120, each
  one wave of 128-132 CTAs) and 1.61 ms against 1.56 ms at Mixtral's shape; SMs 78% and 88% busy against 80-95%,
  168 registers, one CTA an SM. Judged at the card's own clocks the gaps are wider (0.82 and 0.89).
* Where the rest is, from ncu at 32768 x 7168 x 2048 (before the shared-memory search): this kernel read 4.03 GB
  from DRAM (L2 hit rate 59%) where torch's CUTLASS grouped kernel read 1.24 GB (76%), with clusters of 2 and
  B multicast; the tile order and the absence of clusters here (the two CTAs of a pair would sit in different
  experts) are the next things to try. K = 2048 also leaves the epilogue a larger share, as in gemm/cute_ws.py.
"""
import torch

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.runtime import make_ptr

BACKEND = "cute"
DTYPES = ("bfloat16", "float16")

_TORCH_TO_CUTLASS = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16}
_COMPILED = {}  # (dtype, tile_n, sm_count) -> compiled function
_SMEM_BYTES = 232448
_TILE_M, _TILE_K = 128, 64
_SEARCH_STEPS = 9  # binary search over at most 2**9 - 1 experts (the problem allows 256)


class _GroupedWs:
    def __init__(self, ab_dtype, tile_n):
        self.ab_dtype = ab_dtype
        self.acc_dtype = cutlass.Float32
        self.tile_mnk = (_TILE_M, tile_n, _TILE_K)
        self.threads = 384
        assert 2 * self.threads >= 2 ** _SEARCH_STEPS, "_cumulate's scan takes two slots a thread at most"
        self.epi_tile = (_TILE_M, 32)       # the TMA epilogue's shared-memory tile (8 KiB in 16-bit), 4 in flight
        self.epi_stages = 4
        epi_bytes = _TILE_M * 32 * ab_dtype.width // 8 * self.epi_stages
        # Shared memory: the ring's barriers and the experts' cumulative unit counts (2 KiB) ahead of the
        # 1024-aligned tiles, so 3 KiB before the first tile.
        self.stages = (_SMEM_BYTES - 3072 - epi_bytes) // ((_TILE_M + tile_n) * _TILE_K * ab_dtype.width // 8)
        self.epi_barrier = pipeline.NamedBarrier(barrier_id=1, num_threads=256)

    @cute.jit
    def __call__(self, x_ptr: cute.Pointer, w_ptr: cute.Pointer, out_ptr: cute.Pointer, offs_ptr: cute.Pointer,
                 m: cutlass.Int32, n: cutlass.Int32, k: cutlass.Int32, e: cutlass.Int32,
                 grid_ctas: cutlass.Int32, stream: cuda.CUstream):
        k = cute.assume(k, divby=8)
        n = cute.assume(n, divby=8)
        mA = cute.make_tensor(x_ptr, cute.make_ordered_layout((m, k, 1), order=(1, 0, 2)))
        mB = cute.make_tensor(w_ptr, cute.make_ordered_layout((n, k, e), order=(1, 0, 2)))
        mC = cute.make_tensor(out_ptr, cute.make_ordered_layout((m, n), order=(1, 0)))
        c_layout = utils.LayoutEnum.from_tensor(mC)
        self.c_layout = c_layout
        mOffs = cute.make_tensor(offs_ptr, cute.make_layout(e))
        a_layout = utils.LayoutEnum.from_tensor(mA)
        b_layout = utils.LayoutEnum.from_tensor(mB)
        tiled_mma = sm90_utils.make_trivial_tiled_mma(
            self.ab_dtype, self.ab_dtype, a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
            self.acc_dtype, (2, 1, 1), tiler_mn=(64, self.tile_mnk[1]))
        sA_layout = sm90_utils.make_smem_layout_a(a_layout, self.tile_mnk, self.ab_dtype, self.stages)
        sB_layout = sm90_utils.make_smem_layout_b(b_layout, self.tile_mnk, self.ab_dtype, self.stages)
        tma_a, tA = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), mA, cute.slice_(sA_layout, (None, None, 0)),
            (self.tile_mnk[0], self.tile_mnk[2]))
        tma_b, tB = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), mB, cute.slice_(sB_layout, (None, None, 0)),
            (self.tile_mnk[1], self.tile_mnk[2]))
        sC_layout = sm90_utils.make_smem_layout_epi(self.ab_dtype, c_layout, self.epi_tile, self.epi_stages)
        tma_c, tC = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), mC, cute.slice_(sC_layout, (None, None, 0)),
            self.epi_tile)

        @cute.struct
        class Storage:
            barriers: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            cum: cute.struct.MemRange[cutlass.Int32, 2 ** _SEARCH_STEPS]
            sA: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(sA_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(sB_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(sC_layout)], 1024]

        self.storage = Storage
        self.kernel(tma_a, tA, tma_b, tB, tma_c, tC, mC, mOffs, tiled_mma, sA_layout, sB_layout,
                    sC_layout).launch(
            grid=[grid_ctas, 1, 1], block=[self.threads, 1, 1], min_blocks_per_mp=1, stream=stream)

    @cute.jit
    def _locate(self, mOffs: cute.Tensor, sCum: cute.Tensor, experts: cutlass.Int32, unit: cutlass.Int32):
        """The unit's (expert, first row of its M-tile, the expert's end row, N-tile). The search reads the
        cumulative counts from shared memory: nine dependent loads from global memory cost each unit microseconds
        (ncu: 53% of the consumer warps' cycles stalled on the long scoreboard at K = 2048)."""
        lo = cutlass.Int32(0)
        hi = experts
        for _ in cutlass.range_constexpr(_SEARCH_STEPS):      # the first expert whose cumulative count > unit
            mid = cutlass.min((lo + hi) // 2, experts - 1)
            if lo < hi:
                if sCum[mid] <= unit:
                    lo = mid + 1
                else:
                    hi = mid
        ex = lo
        base = cutlass.Int32(0)
        start = cutlass.Int32(0)
        if ex > 0:
            base = sCum[ex - 1]
            start = mOffs[ex - 1]
        end = mOffs[ex]
        m_tiles = (end - start + _TILE_M - 1) // _TILE_M
        local = unit - base
        return ex, start + (local % m_tiles) * _TILE_M, end, local // m_tiles

    @cute.jit
    def _cumulate(self, mOffs: cute.Tensor, sCum: cute.Tensor, experts: cutlass.Int32, n_tiles: cutlass.Int32,
                  tidx: cutlass.Int32):
        """Each expert's work units (ceil(rows / 128) M-tiles x the N-tiles), cumulated, into shared memory, by
        the whole CTA: one count a slot read straight from the offsets, then a Hillis-Steele scan over the 2**9
        slots (nine steps, each a read, a barrier, a write and a barrier). No launch before the kernel computes
        them; every CTA computes the same sums."""
        slots = 2 ** _SEARCH_STEPS
        for i in range(tidx, slots, self.threads):
            count = cutlass.Int32(0)
            if i < experts:
                start = cutlass.Int32(0)
                if i > 0:
                    start = mOffs[i - 1]
                count = (mOffs[i] - start + _TILE_M - 1) // _TILE_M * n_tiles
            sCum[i] = count
        cute.arch.barrier()
        for step in cutlass.range_constexpr(_SEARCH_STEPS):
            lo = cutlass.Int32(0)
            hi = cutlass.Int32(0)
            if tidx >= (1 << step):
                lo = sCum[tidx - (1 << step)]
            if tidx + self.threads < slots:
                hi = sCum[tidx + self.threads - (1 << step)]
            cute.arch.barrier()
            sCum[tidx] = sCum[tidx] + lo
            if tidx + self.threads < slots:
                sCum[tidx + self.threads] = sCum[tidx + self.threads] + hi
            cute.arch.barrier()
        return sCum

    @cute.kernel
    def kernel(self, tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom, mB: cute.Tensor,
               tma_c: cute.CopyAtom, tC: cute.Tensor, mC: cute.Tensor, mOffs: cute.Tensor, tiled_mma: cute.TiledMma,
               sA_layout: cute.ComposedLayout, sB_layout: cute.ComposedLayout, sC_layout: cute.ComposedLayout):
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        grid, _, _ = cute.arch.grid_dim()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = cute.arch.make_warp_uniform(tidx // 128)
        if warp == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_c)

        storage = cutlass.utils.SmemAllocator().allocate(self.storage)
        stage_bytes = (cute.size_in_bytes(self.ab_dtype, cute.slice_(sA_layout, (None, None, 0)))
                       + cute.size_in_bytes(self.ab_dtype, cute.slice_(sB_layout, (None, None, 0))))
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.barriers.data_ptr(), num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 8),
            tx_count=stage_bytes, cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)), defer_sync=True)
        pipeline.pipeline_init_arrive(cluster_shape_mn=(1, 1), is_relaxed=True)

        sA = storage.sA.get_tensor(sA_layout.outer, swizzle=sA_layout.inner)
        sB = storage.sB.get_tensor(sB_layout.outer, swizzle=sB_layout.inner)
        sC = storage.sC.get_tensor(sC_layout.outer, swizzle=sC_layout.inner)
        # (bN, bK, tiles N, tiles K, E)
        gB = cute.local_tile(mB, cute.slice_(self.tile_mnk, (0, None, None)), (None, None, None))
        tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
            tma_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))
        k_tiles = cute.size(gB, mode=[3])
        experts = cute.size(mOffs)
        sCum = self._cumulate(mOffs, storage.cum.get_tensor(cute.make_layout(2 ** _SEARCH_STEPS)), experts,
                              cute.size(gB, mode=[2]), tidx)
        units = sCum[experts - 1]

        pipeline.pipeline_init_wait(cluster_shape_mn=(1, 1))

        if wg == 0:
            cute.arch.warpgroup_reg_dealloc(40)
            if warp == 0:
                state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
                unit = bid
                while unit < units:
                    ex, row0, end, n_tile = self._locate(mOffs, sCum, experts, unit)
                    # this M-tile's rows of x, from the expert's own first row
                    gA = cute.local_tile(cute.domain_offset((row0, 0, 0), mA),
                                         cute.slice_(self.tile_mnk, (None, 0, None)), (0, None, 0))
                    tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
                        tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
                    tBgB_t = tBgB[(None, n_tile, None, ex)]
                    for kt in range(k_tiles):
                        ring.producer_acquire(state)
                        bar = ring.producer_get_barrier(state)
                        cute.copy(tma_a, tAgA[(None, kt)], tAsA[(None, state.index)], tma_bar_ptr=bar)
                        cute.copy(tma_b, tBgB_t[(None, kt)], tBsB[(None, state.index)], tma_bar_ptr=bar)
                        ring.producer_commit(state)
                        state.advance()
                    unit = unit + grid
                ring.producer_tail(state)
        else:
            cute.arch.warpgroup_reg_alloc(232)
            ctid = tidx - 128
            thr_mma = tiled_mma.get_slice((wg - 1) * 128)
            tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
            tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
            tile_mn = cute.slice_(self.tile_mnk, (None, None, 0))
            acc = cute.make_rmem_tensor(
                thr_mma.partition_C(cute.local_tile(mC, tile_mn, (0, 0))).shape, self.acc_dtype)
            out = cute.make_rmem_tensor(acc.shape, self.ab_dtype)
            k_blocks = cute.size(tCrA, mode=[2])
            thr_c = tiled_mma.get_slice(ctid)
            # The TMA epilogue (tiles wholly inside their expert): accumulators -> 16-bit registers -> shared
            # memory (stmatrix) -> global (TMA store), as in gemm/cute_ws.py.
            store_atom = sm90_utils.get_smem_store_op(self.c_layout, self.ab_dtype, self.acc_dtype)
            r2s = cute.make_tiled_copy_S(store_atom, cute.make_tiled_copy_C_atom(store_atom, tiled_mma))
            thr_r2s = r2s.get_slice(ctid)
            tRS_sC = thr_r2s.partition_D(sC)
            tRS_acc = r2s.retile(acc)
            rC_shape = cute.shape(thr_r2s.partition_S(sC))[:3]
            rC32 = cute.make_rmem_tensor(rC_shape, self.acc_dtype)
            rC16 = cute.make_rmem_tensor(rC_shape, self.ab_dtype)
            per_epi = cute.size(rC32)
            stores = pipeline.PipelineTmaStore.create(
                num_stages=self.epi_stages, producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 256))
            stored = cutlass.Int32(0)       # epilogue tiles stored through shared memory so far (buffer rotation)
            read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            unit = bid
            while unit < units:
                ex, row0, end, n_tile = self._locate(mOffs, sCum, experts, unit)
                acc.fill(0.0)
                tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                cute.nvgpu.warpgroup.fence()
                for kt in range(k_tiles):
                    ring.consumer_wait(read)
                    for kb in cutlass.range_constexpr(k_blocks):
                        cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, read.index)],
                                  tCrB[(None, None, kb, read.index)], acc)
                    cute.nvgpu.warpgroup.commit_group()
                    cute.nvgpu.warpgroup.wait_group(1)
                    if kt > 0:
                        ring.consumer_release(release)
                        release.advance()
                    read.advance()
                cute.nvgpu.warpgroup.wait_group(0)
                ring.consumer_release(release)
                release.advance()

                if row0 + _TILE_M <= end:
                    # Wholly inside the expert: TMA stores (clipped at N and M by the tensor map).
                    tiles = cute.zipped_divide(
                        cute.local_tile(cute.domain_offset((row0, 0), tC), tile_mn, (0, n_tile)), self.epi_tile)
                    bSG_sC, bSG_gC = cute.nvgpu.cpasync.tma_partition(
                        tma_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2), tiles)
                    n_epi = cute.size(tiles, mode=[1])
                    epi_grid = cute.make_layout(tiles.shape[1], stride=(tiles.shape[1][1], 1))
                    for e in cutlass.range_constexpr(n_epi):
                        for v in cutlass.range_constexpr(per_epi):
                            rC32[v] = tRS_acc[e * per_epi + v]
                        rC16.store(rC32.load().to(self.ab_dtype))
                        buf = (stored + e) % self.epi_stages
                        cute.copy(r2s, rC16, tRS_sC[(None, None, None, buf)])
                        cute.arch.fence_proxy("async.shared", space="cta")
                        self.epi_barrier.arrive_and_wait()
                        if warp == 4:
                            cute.copy(tma_c, bSG_sC[(None, buf)], bSG_gC[(None, epi_grid.get_hier_coord(e))])
                            stores.producer_commit()
                            stores.producer_acquire()
                        self.epi_barrier.arrive_and_wait()
                    stored = stored + n_epi
                else:
                    # The expert's last M-tile: straight from registers, rows up to its end, columns up to N.
                    out.store(acc.load().to(self.ab_dtype))
                    gC = cute.local_tile(cute.domain_offset((row0, 0), mC), tile_mn, (0, n_tile))
                    cC = cute.local_tile(cute.domain_offset((row0, 0), cute.make_identity_tensor(mC.shape)),
                                         tile_mn, (0, n_tile))
                    tCgC = thr_c.partition_C(gC)
                    tCcC = thr_c.partition_C(cC)
                    for i in cutlass.range_constexpr(cute.size(out)):
                        if cute.elem_less(tCcC[i], (end, mC.shape[1])):
                            tCgC[i] = out[i]
                unit = unit + grid
            stores.producer_tail()


def _compile(dtype, tile_n, sms, args):
    key = (dtype, tile_n, sms)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = cute.compile(_GroupedWs(dtype, tile_n), *args)
        _COMPILED[key] = fn
    return fn


def _padded(t, shape):
    """A zero-padded, 16-byte-aligned copy of t (t itself when nothing needs padding)."""
    if tuple(t.shape) == tuple(shape) and t.data_ptr() % 16 == 0:
        return t
    out = torch.zeros(shape, dtype=t.dtype, device=t.device)
    out[tuple(slice(0, s) for s in t.shape)] = t
    return out


def solve(x, w, offs):
    assert x.dim() == 2 and w.dim() == 3 and offs.dim() == 1, (x.shape, w.shape, offs.shape)
    assert x.shape[1] == w.shape[2] and offs.shape[0] == w.shape[0], (x.shape, w.shape, offs.shape)
    if x.dtype != w.dtype or x.dtype not in _TORCH_TO_CUTLASS:
        raise TypeError(f"unsupported dtypes {x.dtype}, {w.dtype}")
    M, K = x.shape
    E, N, _ = w.shape
    if M == 0 or N == 0 or K == 0 or E == 0:
        return torch.zeros((M, N), dtype=x.dtype, device=x.device)
    assert E < 2 ** _SEARCH_STEPS, f"at most {2 ** _SEARCH_STEPS - 1} experts"
    Kp, Np = -(-K // 8) * 8, -(-N // 8) * 8
    assert max(M * Kp, E * Np * Kp, M * Np) < 2**31, "32-bit index math"
    x_p = _padded(x.contiguous(), (M, Kp))
    w_p = _padded(w.contiguous(), (E, Np, Kp))
    out = torch.empty((M, Np), dtype=x.dtype, device=x.device)
    with torch.cuda.device(x.device):
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        tile_n = 256 if Np >= 2048 and Kp >= 4096 else 128    # short K: the epilogue is a larger share
        n_tiles = -(-Np // tile_n)
        offs = offs.to(torch.int32).contiguous()      # no-op for the convention's int32 offsets
        most = (-(-M // _TILE_M) + min(E, M)) * n_tiles            # a bound on the units, known without a sync
        dtype = _TORCH_TO_CUTLASS[x.dtype]
        ptrs = [make_ptr(dtype, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16) for t in (x_p, w_p, out)]
        ptrs.append(make_ptr(cutlass.Int32, offs.data_ptr(), cute.AddressSpace.gmem, assumed_align=4))
        stream = cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
        args = (*ptrs, M, Np, Kp, E, min(most, sms), stream)
        _compile(dtype, tile_n, sms, args)(*args)
    return out if Np == N else out[:, :N].contiguous()
