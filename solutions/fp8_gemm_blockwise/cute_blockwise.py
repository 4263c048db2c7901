"""Block-scaled FP8 GEMM (DeepSeek-V3 recipe) in NVIDIA's CuTe DSL for Hopper: an activation-quantization kernel,
then a warp-specialised, persistent fp8 wgmma GEMM that promotes to fp32 every 128 of K (DeepGEMM's structure).

Written against nvidia-cutlass-dsl 4.8.1 from its API and NVIDIA's PTX documentation; the pipeline, scheduler and
epilogue are those of gemm/cute_ws.py (a solution is one self-contained file, so they are repeated here).

Why this design
---------------
* Activation quantization (``_Quant``), the reference's rule bit for bit under its ``reciprocal`` convention: one
  half-warp per (row, 128-wide K block), each lane loading 8 bf16 (16 bytes; the half-warp reads the block's 256
  contiguous bytes), amax by four butterfly shuffles, scale = amax / 448 (``div.rn.f32``: the IEEE quotient), 1.0 for an
  all-zero block; q = e4m3(clamp(x * rcp.rn(scale), -448, 448)) through ``cvt.rn.satfinite.e4m3x2.f32`` (round to
  nearest even, subnormals kept). Both instructions were read in the generated PTX. q is written K-padded to a
  multiple of 128 (x is zero-padded first when K is not: zeros change no amax), and the scales K-block-major,
  (KB, M'), so a consumer thread's two rows per K block are one 32-byte sector for its quad.
* GEMM (``_BlockScaledWs``): one producer warp issues TMA loads of 128 x 128 fp8 tiles of xq and of the stored
  weight (N, K), both K-major as fp8 wgmma requires, into a ring of 6 stages (32 KiB each); two consumer
  warpgroups (232 registers each) each own 64 rows of the 128 x BN tile. Per K block (= one stage = the
  quantization block): four m64nBNk32 wgmma into a fresh fp32 ``partial`` (the tensor cores' own accumulation
  inside one block, exactly DeepGEMM's span), wait, release the stage, then ``acc += partial * (x_scale[row] *
  w_scale[n_block])`` in full fp32 registers: promotion every 128 of K, the scales applied where they change.
  Two partials per warpgroup: block t's wgmma are issued before block t - 1's partial is promoted, so the tensor
  cores never wait for the promotion (3 x 64 fp32 registers at BN = 128). The scales for a K block are loaded
  before its wgmma are issued, so their latency hides under the math.
* BN = 128 (one weight-scale block per tile: the scale is one scalar per K block) or 64 for a single row of tiles
  (decode); clusters of 2 along M with the weight tile multicast to both CTAs; persistent CTAs on the static tile
  scheduler, tiles walked in groups of 4 clusters along the shorter side, or along N for long K (``_plan``).
* Epilogue: fp32 -> bf16 registers -> shared memory (stmatrix) -> TMA stores that clip at the matrix's edge; the
  whole tile (at most 4 chunks of 128 x 32) is staged behind one barrier and stored by one warp, whose next wait
  for the stores to have read shared memory comes a whole mainloop later. TMA loads past an edge fill zeros, so
  M, N and K need not be multiples of the tile.
* TMA needs 16-byte row strides: the weight is used in place when K % 16 == 0 (else a zero-padded copy), the
  output is written (M, N') with N' a multiple of 8 and sliced when N is not. The benchmark shapes need neither.
* One compiled kernel per specialisation (BN, cluster, tile order, SM count) and one quantization kernel, cached;
  compilation happens in the first call (the judge's warm-up), never inside a timed call. Index math is 32-bit.

Notes (floor, prediction, measurement, what was tried)
------------------------------------------------------
* Floor, H100 SXM: the judge measured the fp8 ceiling at 1457 TFLOP/s (cuBLASLt fp8 through torch) and copies at
  3.0 TB/s. The quantization reads x in bf16 and writes it in fp8, 3 bytes per element: 4096 x 7168 is 88 MB,
  29 us, beside 124 GFLOP of GEMM at 4096 x 2112 x 7168 (85 us at the ceiling), so that shape cannot pass 0.73 of
  the ceiling with an unfused quantization. Decode (M = 64, 128) is bound by reading the weight (7168 x 16384
  fp8 = 117 MB: 39 us).
* Prediction: the baseline quantizes with a dozen torch kernels over x in fp32 before cuBLASLt's block-scaled GEMM,
  so this pair should win most where the activation is large beside the GEMM.
* Measured on an H100 (2026-11-27), ``gauntlet run --device cuda`` at the defaults (seed 162: 39 fuzzed cases x 3
  calls passed; also 18 probe shapes, odd and aligned, with the quantization bitwise equal to the reference's, and
  non-contiguous inputs bitwise equal to contiguous ones), against torch_blockwise (cuBLASLt block-scaled) in the
  same judgement, shapes in problem.yaml's order: 3.83 / 1.22 / 2.10 / 2.06 / 2.47 / 1.49 (geomean 2.05x);
  712 / 961 / 1053 / 884 TFLOP/s at prefill = 0.49 / 0.66 / 0.72 / 0.61 of the ceiling that run measured
  (1461 TFLOP/s). The ceiling is measured again in every judgement and moves: the run before (seed 160, the same
  kernel less the scale prefetch) measured 1519 TFLOP/s, and the K = 2048 shape's 886 TFLOP/s read 0.58 there, so
  that shape sits at the threshold rather than over it. Issue 19 asks >= 1.5x the best torch path (met) and >= 60%
  of the ceiling at prefill: met on two shapes, at the threshold on 4096 x 7168 x 2048 (16 K blocks per tile, too
  few to hide a tile's epilogue; 0.66 with its inputs warm in L2), not on 4096 x 2112 x 7168 (18% of its time
  quantizing, and its 544 tiles fill 4.1 waves of 132 SMs, so 5). Earlier versions passed ``gauntlet eval`` with
  seeds 151, 152, 153 and 160.
* Where the GEMM itself stands (ncu, 4096 x 7168 x 2048, clocks held by ncu): 150 us against 128 us for cuBLASLt's
  own block-scaled kernel (nvjet ..._128x128_128x6_1x2_..._Ablk128_Bvec128), which the baseline then loses to
  torch's quantization (12 kernels, 163 us in the same ncu run). Before the scale prefetch, 28% of the consumer
  warps' cycles were stalled on the long scoreboard (the scale loads) against 15% in cuBLASLt's.
* What moved it (CUDA graphs of back-to-back calls, same H100): promoting K block t - 1 while block t's wgmma run
  (two partials) instead of waiting for each block: 222 -> 180, 1283 -> 1014, 137 -> 133, 77 -> 68 us; the whole
  tile's epilogue behind two barriers instead of two per 128 x 32 chunk: 176 -> 173, 315 -> 304, 955 -> 927,
  130 -> 126 us; 64-wide tiles at decode: 23.1 -> 21.5 us at 128 x 24576 x 1536; a programmatic dependent launch
  of the GEMM: 0 to 1.4 us (within the noise at 64 x 7168 x 16384); loading each K block's scales a whole block
  ahead: 684 -> 712, 988 -> 961, 1037 -> 1053, 886 -> 884 TFLOP/s as judged (two runs: within their noise but
  for the first shape). The quantization alone: 32 us at 4096 x 7168 (2.7 TB/s), 70 us at 4096 x 16384.
* Tried and not kept: 64-wide tiles at prefill (196 / 468 / 1468 / 187 against 180 / 318 / 1014 / 133 us); issuing
  the next tile's first K block before this tile's epilogue (the loop restructured to carry raw scales and the
  next tile's rows): slower on every prefill shape whether that issue came before or after the epilogue
  (198 / 336 / 1099 / 140 us against 169 to 173 / 300 to 304 / 921 to 927 / 126 us on the machines before and
  after), so the restructured loop itself cost it; not investigated further (the slower file is not kept).
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

BLOCK = 128                 # quantization block along K, the weight's block along N and K, and the GEMM's K tile
FP8_MAX = 448.0
_COMPILED = {}              # specialisation -> compiled function
_SMEM_BYTES = 232448        # sm_90: 227 KiB of shared memory per block
_TILE_M = 128
_QUANT_WARPS = 8            # warps per quantization CTA (two (row, K block) tasks each)


class _Quant:
    """xq (M, Kp) fp8 and xs (Kp / 128, M') fp32 from x (M, Kp) bf16, Kp a multiple of 128: one half-warp per
    (row, K block)."""

    @cute.jit
    def __call__(self, x_ptr: cute.Pointer, q_ptr: cute.Pointer, s_ptr: cute.Pointer, m: cutlass.Int32,
                 k: cutlass.Int32, s_ld: cutlass.Int32, stream: cuda.CUstream):
        k = cute.assume(k, divby=BLOCK)
        mX = cute.make_tensor(x_ptr, cute.make_ordered_layout((m, k), order=(1, 0)))
        mQ = cute.make_tensor(q_ptr, cute.make_ordered_layout((m, k), order=(1, 0)))
        kbs = k // BLOCK
        mS = cute.make_tensor(s_ptr, cute.make_ordered_layout((kbs, s_ld), order=(1, 0)))
        per_cta = 2 * _QUANT_WARPS
        self.kernel(mX, mQ, mS, m, kbs).launch(grid=[(m * kbs + per_cta - 1) // per_cta, 1, 1],
                                               block=[32 * _QUANT_WARPS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mQ: cute.Tensor, mS: cute.Tensor, m: cutlass.Int32, kbs: cutlass.Int32):
        # The GEMM (launched with programmatic dependent launch) may start its prologue now; it waits for this
        # grid's end before reading anything written here.
        cute.arch.griddepcontrol_launch_dependents()
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        lane = tidx % 32
        sub = lane % 16
        # Two (row, K block) tasks per warp, one per half-warp. The last CTA's surplus half-warps redo the last
        # task (same values to the same addresses) rather than skip it: every lane must take part in the shuffles.
        task = cutlass.min((bidx * _QUANT_WARPS + tidx // 32) * 2 + lane // 16, m * kbs - 1)
        row = task // kbs
        kb = task - row * kbs
        # The lane's 8 consecutive elements of the block: a 16-byte load, an 8-byte store.
        gX = cute.local_tile(mX, (1, 8), (row, kb * (BLOCK // 8) + sub))
        gQ = cute.local_tile(mQ, (1, 8), (row, kb * (BLOCK // 8) + sub))
        xv = cute.make_rmem_tensor((1, 8), cutlass.BFloat16)
        cute.autovec_copy(gX, xv)
        v = xv.load().to(cutlass.Float32)
        amax = abs(v[0])
        for j in cutlass.range_constexpr(1, 8):
            amax = cute.arch.fmax(amax, abs(v[j]))
        amax = cute.arch.warp_reduction_max(amax, threads_in_group=16)
        scale = cutlass.Float32(1.0)
        if amax > cutlass.Float32(0.0):
            scale = amax / cutlass.Float32(FP8_MAX)               # div.rn.f32
        inv = cutlass.Float32(1.0) / scale                         # rcp.rn.f32
        qv = cute.make_rmem_tensor((1, 8), cutlass.Float32)
        for j in cutlass.range_constexpr(8):
            qv[j] = cute.arch.fmin(cute.arch.fmax(v[j] * inv, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
        q8 = cute.make_rmem_tensor((1, 8), cutlass.Float8E4M3FN)
        q8.store(qv.load().to(cutlass.Float8E4M3FN))               # cvt.rn.satfinite.e4m3x2.f32
        cute.autovec_copy(q8, gQ)
        if sub == 0:
            mS[kb, row] = scale


class _BlockScaledWs:
    """C (M, N) bf16 = sum over K blocks of (xq_kb times w_kb transposed) * x_scale[:, kb] * w_scale[n // 128, kb];
    xq (M, Kp) and w (N, K) fp8 K-major; one producer warp and two consumer warpgroups per CTA, a persistent CTA
    per SM."""

    def __init__(self, tile_n, cluster_m, swizzle):
        self.ab_dtype = cutlass.Float8E4M3FN
        self.c_dtype = cutlass.BFloat16
        self.acc_dtype = cutlass.Float32
        self.epi_tile = (128, 32)
        self.epi_stages = 4
        self.tile_mnk = (_TILE_M, tile_n, BLOCK)
        self.cluster_mn = (cluster_m, 1)
        self.swizzle = swizzle
        self.consumer_wgs = 2
        self.threads = 128 * (1 + self.consumer_wgs)
        self.consumer_threads = 128 * self.consumer_wgs
        ab_bytes = (_TILE_M + tile_n) * BLOCK
        epi_bytes = self.epi_tile[0] * self.epi_tile[1] * 2 * self.epi_stages
        self.stages = min(8, (_SMEM_BYTES - 1024 - epi_bytes) // ab_bytes)
        self.epi_barrier = pipeline.NamedBarrier(barrier_id=1, num_threads=self.consumer_threads)
        assert tile_n // self.epi_tile[1] <= self.epi_stages, "the epilogue keeps a whole tile in shared memory"

    @cute.jit
    def __call__(self, a_ptr: cute.Pointer, b_ptr: cute.Pointer, c_ptr: cute.Pointer, sa_ptr: cute.Pointer,
                 sb_ptr: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32, nc: cutlass.Int32, k: cutlass.Int32,
                 kw: cutlass.Int32, sa_ld: cutlass.Int32, max_clusters: cutlass.Constexpr, stream: cuda.CUstream):
        # a: xq (m, k) with k = Kp, a multiple of 128; b: the weight (n, kw) with kw <= k, a multiple of 16 (TMA
        # fills zeros past kw and n); c: (m, nc), nc >= n a multiple of 8; sa: (k / 128, sa_ld) fp32; sb: w_scale
        # (ceil(n / 128), k / 128) fp32.
        k = cute.assume(k, divby=BLOCK)
        kw = cute.assume(kw, divby=16)
        nc = cute.assume(nc, divby=8)
        kbs = k // BLOCK
        mA = cute.make_tensor(a_ptr, cute.make_ordered_layout((m, k, 1), order=(1, 0, 2)))
        mB = cute.make_tensor(b_ptr, cute.make_ordered_layout((n, kw, 1), order=(1, 0, 2)))
        mC = cute.make_tensor(c_ptr, cute.make_ordered_layout((m, nc, 1), order=(1, 0, 2)))
        mSA = cute.make_tensor(sa_ptr, cute.make_ordered_layout((kbs, sa_ld), order=(1, 0)))
        mSB = cute.make_tensor(sb_ptr, cute.make_ordered_layout(((n + BLOCK - 1) // BLOCK, kbs), order=(1, 0)))
        a_layout = utils.LayoutEnum.from_tensor(mA)
        b_layout = utils.LayoutEnum.from_tensor(mB)
        c_layout = utils.LayoutEnum.from_tensor(mC)
        self.c_layout = c_layout

        tiled_mma = sm90_utils.make_trivial_tiled_mma(
            self.ab_dtype, self.ab_dtype, a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
            self.acc_dtype, (self.consumer_wgs, 1, 1), tiler_mn=(64, self.tile_mnk[1]))
        sA_layout = sm90_utils.make_smem_layout_a(a_layout, self.tile_mnk, self.ab_dtype, self.stages)
        sB_layout = sm90_utils.make_smem_layout_b(b_layout, self.tile_mnk, self.ab_dtype, self.stages)
        sC_layout = sm90_utils.make_smem_layout_epi(self.c_dtype, c_layout, self.epi_tile, self.epi_stages)

        cluster_m = self.cluster_mn[0]
        tma_a, tA = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), mA, cute.slice_(sA_layout, (None, None, 0)),
            (self.tile_mnk[0], self.tile_mnk[2]))
        b_op = (cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp() if cutlass.const_expr(cluster_m > 1)
                else cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp())
        tma_b, tB = cute.nvgpu.cpasync.make_tiled_tma_atom(
            b_op, mB, cute.slice_(sB_layout, (None, None, 0)), (self.tile_mnk[1], self.tile_mnk[2]),
            num_multicast=cluster_m)
        tma_c, tC = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), mC, cute.slice_(sC_layout, (None, None, 0)), self.epi_tile)

        tiles = cute.zipped_divide(mC, tiler=(self.tile_mnk[0], self.tile_mnk[1]))
        sched_params = utils.PersistentTileSchedulerParams(
            tiles[(0, (None, None, None))].shape, (*self.cluster_mn, 1), abs(self.swizzle), self.swizzle > 0)
        grid = utils.StaticPersistentTileScheduler.get_grid_shape(sched_params, max_clusters)

        @cute.struct
        class Storage:
            barriers: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            sA: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(sA_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(sB_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[self.c_dtype, cute.cosize(sC_layout)], 1024]

        self.storage = Storage
        self.kernel(tma_a, tA, tma_b, tB, tma_c, tC, mC, mSA, mSB, kbs, tiled_mma, sA_layout, sB_layout, sC_layout,
                    sched_params).launch(grid=grid, block=[self.threads, 1, 1], cluster=(*self.cluster_mn, 1),
                                         min_blocks_per_mp=1, stream=stream, use_pdl=True)

    @cute.kernel
    def kernel(self, tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom, mB: cute.Tensor,
               tma_c: cute.CopyAtom, mC: cute.Tensor, mC_mem: cute.Tensor, mSA: cute.Tensor, mSB: cute.Tensor,
               kbs: cutlass.Int32, tiled_mma: cute.TiledMma, sA_layout: cute.ComposedLayout,
               sB_layout: cute.ComposedLayout, sC_layout: cute.ComposedLayout,
               sched_params: utils.PersistentTileSchedulerParams):
        tidx, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = cute.arch.make_warp_uniform(tidx // 128)
        cluster_m = self.cluster_mn[0]
        if warp == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_c)

        cta_layout = cute.make_layout((*self.cluster_mn, 1))
        rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cluster_coord = cta_layout.get_flat_coord(rank)
        b_mask = cute.make_layout_image_mask(cta_layout, cluster_coord, mode=0) if cutlass.const_expr(
            cluster_m > 1) else 0

        storage = cutlass.utils.SmemAllocator().allocate(self.storage)
        stage_bytes = (cute.size_in_bytes(self.ab_dtype, cute.slice_(sA_layout, (None, None, 0)))
                       + cute.size_in_bytes(self.ab_dtype, cute.slice_(sB_layout, (None, None, 0))))
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.barriers.data_ptr(), num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, cluster_m * self.consumer_wgs * 4),
            tx_count=stage_bytes, cta_layout_vmnk=cute.make_layout((1, *cta_layout.shape)), defer_sync=True)
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_mn, is_relaxed=True)

        sA = storage.sA.get_tensor(sA_layout.outer, swizzle=sA_layout.inner)
        sB = storage.sB.get_tensor(sB_layout.outer, swizzle=sB_layout.inner)
        sC = storage.sC.get_tensor(sC_layout.outer, swizzle=sC_layout.inner)

        gA = cute.local_tile(mA, cute.slice_(self.tile_mnk, (None, 0, None)), (None, None, None))
        gB = cute.local_tile(mB, cute.slice_(self.tile_mnk, (0, None, None)), (None, None, None))
        gC = cute.local_tile(mC, cute.slice_(self.tile_mnk, (None, None, 0)), (None, None, None))
        tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
            tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
        tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
            tma_b, cluster_coord[0], cute.make_layout(cluster_m), cute.group_modes(sB, 0, 2),
            cute.group_modes(gB, 0, 2))

        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_mn)
        # Launched as a programmatic dependent of the quantization kernel: everything above (barriers, descriptor
        # prefetch, the cluster's handshake) overlapped its tail; nothing below may read xq or xs before it ends.
        cute.arch.griddepcontrol_wait()

        if wg == 0:
            cute.arch.warpgroup_reg_dealloc(40)
            if warp == 0:
                psched = utils.StaticPersistentTileScheduler.create(
                    sched_params, cute.arch.block_idx(), cute.arch.grid_dim())
                pwork = psched.initial_work_tile_info()
                state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
                while pwork.is_valid_tile:
                    ptile = pwork.tile_idx
                    tAgA_t = tAgA[(None, ptile[0], None, 0)]
                    tBgB_t = tBgB[(None, ptile[1], None, 0)]
                    for kt in range(kbs):
                        ring.producer_acquire(state)
                        bar = ring.producer_get_barrier(state)
                        cute.copy(tma_a, tAgA_t[(None, kt)], tAsA[(None, state.index)], tma_bar_ptr=bar)
                        cute.copy(tma_b, tBgB_t[(None, kt)], tBsB[(None, state.index)], tma_bar_ptr=bar,
                                  mcast_mask=b_mask)
                        ring.producer_commit(state)
                        state.advance()
                    psched.advance_to_next_work()
                    pwork = psched.get_current_work()
                ring.producer_tail(state)
        else:
            cute.arch.warpgroup_reg_alloc(232)
            c_layout = self.c_layout
            ctid = tidx - 128
            thr_mma = tiled_mma.get_slice((wg - 1) * 128)
            tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
            tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
            acc = cute.make_rmem_tensor(thr_mma.partition_C(gC).shape[:3], self.acc_dtype)
            pa = cute.make_rmem_tensor(thr_mma.partition_C(gC).shape[:3], self.acc_dtype)
            pb = cute.make_rmem_tensor(thr_mma.partition_C(gC).shape[:3], self.acc_dtype)
            k_blocks = cute.size(tCrA, mode=[2])
            # Each accumulator element's (m, n): wgmma's C fragment holds, per thread, rows r and r + 8 of its
            # warp's 16 (element i's row half is (i // 2) % 2); the identity tensor gives r.
            thr_c = tiled_mma.get_slice(ctid)
            cC = cute.local_tile(cute.make_identity_tensor(mC_mem.shape), cute.slice_(self.tile_mnk, (None, None, 0)),
                                 (None, None, None))

            store_atom = sm90_utils.get_smem_store_op(c_layout, self.c_dtype, self.acc_dtype)
            r2s = cute.make_tiled_copy_S(store_atom, cute.make_tiled_copy_C_atom(store_atom, tiled_mma))
            thr_r2s = r2s.get_slice(ctid)
            tRS_sC = thr_r2s.partition_D(sC)
            tRS_acc = r2s.retile(acc)
            rC_shape = cute.shape(thr_r2s.partition_S(sC))[:3]
            rC32 = cute.make_rmem_tensor(rC_shape, self.acc_dtype)
            rCout = cute.make_rmem_tensor(rC_shape, self.c_dtype)
            per_epi = cute.size(rC32)

            sched = utils.StaticPersistentTileScheduler.create(
                sched_params, cute.arch.block_idx(), cute.arch.grid_dim())
            work = sched.initial_work_tile_info()
            read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            while work.is_valid_tile:
                tile = work.tile_idx
                tCcC = thr_c.partition_C(cC[(None, None, *tile)])
                row_lo = tCcC[0][0]
                row_hi = tCcC[2][0]
                n_block = (tile[1] * self.tile_mnk[1]) // BLOCK
                acc.fill(0.0)
                # Two partials: K block t's wgmma run while block t - 1's partial is promoted (unrolled by two,
                # since registers cannot be indexed at run time). fa/fb: the scale products of the block in pa/pb;
                # n_*: the next block's raw scales, loaded a whole block ahead of their use (a load just before its
                # block's math stalled the warps on the scoreboard: 28% of their cycles in ncu).
                sa_b, sa_lo, sa_hi = self._scales(mSA, mSB, n_block, 0, row_lo, row_hi)
                n_b, n_lo, n_hi = self._scales(mSA, mSB, n_block, cutlass.min(1, kbs - 1), row_lo, row_hi)
                tiled_mma = self._issue(ring, read, tiled_mma, pa, tCrA, tCrB, k_blocks)
                read.advance()
                fa_lo = sa_lo * sa_b
                fa_hi = sa_hi * sa_b
                fb_lo = fa_lo
                fb_hi = fa_hi
                for j in range((kbs - 1) // 2):
                    t = 2 * j + 1
                    sb_b, sb_lo, sb_hi = n_b, n_lo, n_hi
                    n_b, n_lo, n_hi = self._scales(mSA, mSB, n_block, t + 1, row_lo, row_hi)
                    tiled_mma = self._issue(ring, read, tiled_mma, pb, tCrA, tCrB, k_blocks)
                    read.advance()
                    cute.nvgpu.warpgroup.wait_group(1)
                    ring.consumer_release(release)
                    release.advance()
                    self._promote(acc, pa, fa_lo, fa_hi)
                    fb_lo = sb_lo * sb_b
                    fb_hi = sb_hi * sb_b
                    sa_b, sa_lo, sa_hi = n_b, n_lo, n_hi
                    n_b, n_lo, n_hi = self._scales(mSA, mSB, n_block, cutlass.min(t + 2, kbs - 1), row_lo, row_hi)
                    tiled_mma = self._issue(ring, read, tiled_mma, pa, tCrA, tCrB, k_blocks)
                    read.advance()
                    cute.nvgpu.warpgroup.wait_group(1)
                    ring.consumer_release(release)
                    release.advance()
                    self._promote(acc, pb, fb_lo, fb_hi)
                    fa_lo = sa_lo * sa_b
                    fa_hi = sa_hi * sa_b
                if kbs % 2 == 0:
                    # One block left (kbs - 1, odd; its scales are n_*): into pb, then drain both.
                    tiled_mma = self._issue(ring, read, tiled_mma, pb, tCrA, tCrB, k_blocks)
                    read.advance()
                    cute.nvgpu.warpgroup.wait_group(1)
                    ring.consumer_release(release)
                    release.advance()
                    self._promote(acc, pa, fa_lo, fa_hi)
                    fb_lo = n_lo * n_b
                    fb_hi = n_hi * n_b
                    cute.nvgpu.warpgroup.wait_group(0)
                    ring.consumer_release(release)
                    release.advance()
                    self._promote(acc, pb, fb_lo, fb_hi)
                else:
                    cute.nvgpu.warpgroup.wait_group(0)
                    ring.consumer_release(release)
                    release.advance()
                    self._promote(acc, pa, fa_lo, fa_hi)

                gC_t = gC[(None, None, *tile)]
                epi_tiles = cute.zipped_divide(gC_t, self.epi_tile)
                bSG_sC, bSG_gC = cute.nvgpu.cpasync.tma_partition(
                    tma_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2), epi_tiles)
                n_epi = cute.size(epi_tiles, mode=[1])
                epi_grid = cute.make_layout(epi_tiles.shape[1], stride=(epi_tiles.shape[1][1], 1))
                # The whole tile fits the epilogue's buffers (BN <= 128: at most 4 chunks of 128 x 32): every chunk
                # to shared memory, one barrier, then one warp issues all the TMA stores. Before writing, that warp
                # waits until the last tile's stores have read the buffers (issued a whole mainloop ago). Two
                # barriers a tile instead of two a chunk: 2 to 4% faster on the four prefill shapes.
                if warp == 4:
                    cute.arch.cp_async_bulk_wait_group(0, read=True)
                self.epi_barrier.arrive_and_wait()
                for e in cutlass.range_constexpr(n_epi):
                    for v in cutlass.range_constexpr(per_epi):
                        rC32[v] = tRS_acc[e * per_epi + v]
                    rCout.store(rC32.load().to(self.c_dtype))
                    cute.copy(r2s, rCout, tRS_sC[(None, None, None, e)])
                cute.arch.fence_proxy("async.shared", space="cta")
                self.epi_barrier.arrive_and_wait()
                if warp == 4:
                    for e in cutlass.range_constexpr(n_epi):
                        cute.copy(tma_c, bSG_sC[(None, e)], bSG_gC[(None, epi_grid.get_hier_coord(e))])
                    cute.arch.cp_async_bulk_commit_group()
                sched.advance_to_next_work()
                work = sched.get_current_work()
            if warp == 4:
                cute.arch.cp_async_bulk_wait_group(0, read=True)

    def _scales(self, mSA, mSB, n_block, kt, row_lo, row_hi):
        """K block kt's scales: the weight block's, and the activation's for this thread's two rows (rows past M
        read the padding of xs: their results are never stored)."""
        return mSB[n_block, kt], mSA[kt, row_lo], mSA[kt, row_hi]

    def _issue(self, ring, read, tiled_mma, part, tCrA, tCrB, k_blocks):
        """Wait for the stage `read` names, then issue its four k32 wgmma into a fresh fp32 partial (the first
        without accumulation) and commit them as one group. Does not advance `read` (the caller's loop must, so the
        DSL carries the state)."""
        ring.consumer_wait(read)
        cute.nvgpu.warpgroup.fence()
        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
        for kb in range(k_blocks):
            cute.gemm(tiled_mma, part, tCrA[(None, None, kb, read.index)], tCrB[(None, None, kb, read.index)], part)
            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        cute.nvgpu.warpgroup.commit_group()
        return tiled_mma

    def _promote(self, acc, part, f_lo, f_hi):
        """acc += part * scale in fp32: element i of wgmma's C fragment is in row r + 8 * ((i // 2) % 2) of the
        thread's pair (checked against partition_C of an identity tensor for BN 64 and 128)."""
        for i in range(cute.size(acc)):
            acc[i] = acc[i] + part[i] * (f_lo if (i // 2) % 2 == 0 else f_hi)


def _plan(M, N, K, sms):
    """(tile_n, cluster_m, swizzle): BN 128 (one weight-scale block per tile); 64 for a single row of tiles
    (decode: bound by reading the weight, so more, smaller tiles fill the GPU's waves better: 128 x 24576 x 1536
    21.5 against 23.1 us on an H100) or when 128-wide tiles would fill less than half the GPU. Not for more rows:
    at 128 x 64 the wgmma's shared-memory reads bind (4096 x 7168 x 2048: 187 against 133 us). Clusters of 2 along
    M when there are two rows of tiles. Tiles walked in groups of 4 clusters along the shorter side, or along N
    for long K with several rows of tiles (4096 x 7168 x 16384: 962 and 976 against 1003 and 1014 us in two runs;
    on the other shapes the shorter side was as fast or faster, and for a single row of tiles four times faster:
    64 x 7168 x 16384, 69 against 264 us)."""
    tiles_m = -(-M // _TILE_M)
    tile_n = 64 if tiles_m == 1 or 2 * tiles_m * -(-N // 128) <= sms else 128
    return tile_n, (2 if tiles_m >= 2 else 1), (-4 if M > N or (K >= 8192 and tiles_m > 1) else 4)


def _ptr(dtype, t):
    return make_ptr(dtype, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)


def _quantize(x, m_pad):
    """(xq (M, Kp) fp8, xs (Kp / 128, m_pad) fp32): the activation quantized per 1x128 block (rows past M of xs
    are left unwritten: the GEMM reads them only for rows it never stores)."""
    M, K = x.shape
    Kp = -(-K // BLOCK) * BLOCK
    dev = x.device
    if Kp != K or not x.is_contiguous() or x.data_ptr() % 16:
        xp = torch.zeros((M, Kp), dtype=x.dtype, device=dev)
        xp[:, :K] = x
        x = xp
    xq = torch.empty((M, Kp), dtype=torch.float8_e4m3fn, device=dev)
    xs = torch.empty((Kp // BLOCK, m_pad), dtype=torch.float32, device=dev)
    stream = cuda.CUstream(torch.cuda.current_stream(dev).cuda_stream)
    args = (_ptr(cutlass.BFloat16, x), _ptr(cutlass.Float8E4M3FN, xq), _ptr(cutlass.Float32, xs), M, Kp, m_pad,
            stream)
    quant = _COMPILED.get("quant")
    if quant is None:
        quant = _COMPILED["quant"] = cute.compile(_Quant(), *args)
    quant(*args)
    return xq, xs


def _run(x, w_fp8, w_scale):
    M, K = x.shape
    N = w_fp8.shape[0]
    Kp = -(-K // BLOCK) * BLOCK
    dev = x.device
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    stream = cuda.CUstream(torch.cuda.current_stream(dev).cuda_stream)
    m_pad = -(-M // _TILE_M) * _TILE_M      # rows past M of the last tile read scales from the padding
    xq, xs = _quantize(x, m_pad)

    w = w_fp8
    if K % 16 or not w.is_contiguous() or w.data_ptr() % 16:
        w = torch.zeros((N, Kp), dtype=torch.uint8, device=dev)
        w[:, :K] = w_fp8.view(torch.uint8)
        w = w.view(torch.float8_e4m3fn)
    kw = w.shape[1]
    ws = w_scale if w_scale.is_contiguous() else w_scale.contiguous()
    Np = -(-N // 8) * 8
    out = torch.empty((M, Np), dtype=torch.bfloat16, device=dev)
    tile_n, cluster_m, swizzle = _plan(M, Np, Kp, sms)
    args = (_ptr(cutlass.Float8E4M3FN, xq), _ptr(cutlass.Float8E4M3FN, w), _ptr(cutlass.BFloat16, out),
            _ptr(cutlass.Float32, xs), _ptr(cutlass.Float32, ws), M, N, Np, Kp, kw, m_pad)
    key = ("gemm", tile_n, cluster_m, swizzle, sms)
    gemm = _COMPILED.get(key)
    if gemm is None:
        gemm = _COMPILED[key] = cute.compile(_BlockScaledWs(tile_n, cluster_m, swizzle), *args, sms // cluster_m,
                                             stream)
    gemm(*args, stream)
    return out if Np == N else out[:, :N].contiguous()


def solve(x, w_fp8, w_scale):
    if x.dim() != 2 or w_fp8.dim() != 2 or x.shape[1] != w_fp8.shape[1]:
        raise ValueError(f"bad shapes x {tuple(x.shape)}, w_fp8 {tuple(w_fp8.shape)}")
    if x.dtype != torch.bfloat16 or w_fp8.dtype != torch.float8_e4m3fn or w_scale.dtype != torch.float32:
        raise TypeError(f"unsupported dtypes {x.dtype}, {w_fp8.dtype}, {w_scale.dtype}")
    M, K = x.shape
    N = w_fp8.shape[0]
    if tuple(w_scale.shape) != (-(-N // BLOCK), -(-K // BLOCK)):
        raise ValueError(f"w_scale {tuple(w_scale.shape)} does not match w_fp8 {tuple(w_fp8.shape)}")
    if M == 0 or N == 0 or K == 0:
        return torch.zeros((M, N), dtype=x.dtype, device=x.device)
    assert max(M * (K + BLOCK), N * (K + BLOCK), M * (N + 8)) < 2**31, "32-bit index math"
    with torch.cuda.device(x.device):
        return _run(x, w_fp8, w_scale)
