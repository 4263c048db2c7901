"""Dense GEMM C = A @ B in NVIDIA's CuTe DSL (nvidia-cutlass-dsl 4.8.1): an Ampere-style tensor-core kernel.

Adapted from the official CUTLASS example ``examples/python/CuTeDSL/ampere/tensorop_gemm.py`` (NVIDIA, BSD-3-Clause)
and, for how it is called, ``examples/python/CuTeDSL/ampere/call_bypass_dlpack.py``.

Why this design
---------------
* SM80 ``mma.sync`` 16x8x16 atoms (fp16/bf16 in, fp32 accumulate), ldmatrix smem->register copies, a 3-stage
  cp.async gmem->smem pipeline with swizzled smem, and a smem-staged epilogue: the example's kernel, kept nearly
  line for line because it is the tested, predicated reference. It runs unchanged on Hopper (H100); a WGMMA/TMA
  kernel would be faster but is much more code to get right, and correctness on every shape comes first here.
* Layouts. A is (M, K) row-major = "K-major"; B is (K, N) row-major, which the kernel sees as an (N, K) tensor with
  strides (1, N) = "N-major"; C is (M, N) row-major. A trailing batch mode of 1 keeps the example's (M, K, L) shape.
  No transposes or copies are made: the kernel reads torch's storage as it is.
* Every shape is served by the same kernel. The example's predication (M/N predicates per copy vector, the K
  remainder handled as the *first*, shifted k-tile) is exact as long as every global copy vector lies wholly inside
  or wholly outside the matrix. So the global copy width is chosen per call: ``vec`` elements = 8 (16-byte cp.async,
  the fast path), 4 or 2 (8/4-byte cp.async), or 1 (a plain 2-byte load; cp.async has no 2-byte form), the largest
  that divides K and N and the three base addresses. Shared-memory layouts, ldmatrix and the MMA are the same in
  every class. ``vec`` = 1 covers odd K such as 3 and any N. One compiled kernel per (dtype, vec), cached below.
* The tensors are handed over as raw pointers plus M, N, K as dynamic Int32 (``make_ptr``, as in
  call_bypass_dlpack.py): this skips DLPack's handling of size-1 modes and its per-call cost, and the divisibility
  of K and N (what the vector copies need) is stated with ``cute.assume``. Index math is 32-bit: M*K, K*N and M*N
  must stay below 2**31 elements (asserted).
* A second, much simpler kernel (one thread per C element, fp32 accumulation, fully predicated) is kept as a
  fallback for non-fast shapes, selected with the environment variable ``GAUNTLET_CUTE_GEMM_UNALIGNED=simt``; by
  default the tensor-core kernel serves every shape.
"""
import math
import os

import torch

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_ptr
from cutlass.tensor_utils import LayoutEnum

BACKEND = "cute"
DTYPES = ("bfloat16", "float16")

_TORCH_TO_CUTLASS = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16}
_UNALIGNED_PATH = os.environ.get("GAUNTLET_CUTE_GEMM_UNALIGNED", "tensorop")  # "tensorop" or "simt"
_COMPILED = {}  # (kernel kind, cutlass dtype, vec) -> compiled function


class _TensorOpGemm:
    """The Ampere tensor-core GEMM of tensorop_gemm.py, for A K-major, B N-major, C N-major (all row-major torch
    tensors), with the global-memory copy width ``vec`` (elements) as a parameter."""

    def __init__(self, dtype, vec):
        self.ab_dtype = dtype
        self.c_dtype = dtype
        self.acc_dtype = cutlass.Float32
        self.vec = vec
        self.gmem_copy_bits = vec * dtype.width
        self.smem_copy_bits = 128  # smem swizzles are laid out for 16-byte units (ldmatrix), whatever vec is
        self.cta_tiler = (128, 128, 32)
        self.num_stages = 3  # 3 x (128x32 + 128x32) x 2 bytes = 48 KiB, the default dynamic smem limit
        self.atom_layout_mnk = (2, 2, 1)
        self.num_threads = 2 * 2 * 1 * 32
        self.bM, self.bN, self.bK = self.cta_tiler
        self.mma_inst_shape = (16, 8, 16)
        self.a_major_mode = LayoutEnum.ROW_MAJOR  # (M, K), K contiguous
        self.b_major_mode = LayoutEnum.COL_MAJOR  # (N, K), N contiguous
        self.c_major_mode = LayoutEnum.ROW_MAJOR  # (M, N), N contiguous

    @cute.jit
    def __call__(
        self,
        a_ptr: cute.Pointer,
        b_ptr: cute.Pointer,
        c_ptr: cute.Pointer,
        m: cutlass.Int32,
        n: cutlass.Int32,
        k: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        k = cute.assume(k, divby=self.vec)
        n = cute.assume(n, divby=self.vec)
        mA = cute.make_tensor(a_ptr, cute.make_ordered_layout((m, k, 1), order=(1, 0, 2)))
        mB = cute.make_tensor(b_ptr, cute.make_ordered_layout((n, k, 1), order=(0, 1, 2)))
        mC = cute.make_tensor(c_ptr, cute.make_ordered_layout((m, n, 1), order=(1, 0, 2)))

        sA_layout = self._make_smem_layout_AB(
            mA.element_type, self.a_major_mode, self.smem_copy_bits,
            (self.cta_tiler[0], self.cta_tiler[2], self.num_stages),
        )
        sB_layout = self._make_smem_layout_AB(
            mB.element_type, self.b_major_mode, self.smem_copy_bits,
            (self.cta_tiler[1], self.cta_tiler[2], self.num_stages),
        )
        sC_layout = self._make_smem_layout_C(
            mC.element_type, self.c_major_mode, self.smem_copy_bits,
            (self.cta_tiler[0], self.cta_tiler[1]),
        )
        smem_size = max(
            cute.size_in_bytes(mC.element_type, sC_layout),
            cute.size_in_bytes(mA.element_type, sA_layout) + cute.size_in_bytes(mB.element_type, sB_layout),
        )

        atom_g2s = self._make_g2s_atom(mA.element_type)
        tiled_copy_A = self._make_gmem_tiled_copy_AB(atom_g2s, mA.element_type, self.a_major_mode, self.gmem_copy_bits)
        tiled_copy_B = self._make_gmem_tiled_copy_AB(atom_g2s, mB.element_type, self.b_major_mode, self.gmem_copy_bits)
        atom_sync_copy = cute.make_copy_atom(
            cute.nvgpu.CopyUniversalOp(), mC.element_type, num_bits_per_copy=self.gmem_copy_bits
        )
        tiled_copy_C = self._make_gmem_tiled_copy_C(atom_sync_copy, mC.element_type, self.c_major_mode, self.gmem_copy_bits)

        op = cute.nvgpu.warp.MmaF16BF16Op(self.ab_dtype, self.acc_dtype, self.mma_inst_shape)
        permutation_mnk = (
            self.atom_layout_mnk[0] * self.mma_inst_shape[0],
            self.atom_layout_mnk[1] * self.mma_inst_shape[1] * 2,
            self.atom_layout_mnk[2] * self.mma_inst_shape[2],
        )
        tC = cute.make_layout(self.atom_layout_mnk)
        tiled_mma = cute.make_tiled_mma(op, tC, permutation_mnk=permutation_mnk)

        grid_dim = cute.ceil_div(mC.shape, (self.bM, self.bN, 1))
        raster_factor = 1
        grid_dim_n = cute.size(grid_dim[1])
        if grid_dim_n > 5:
            raster_factor = 8
        elif grid_dim_n > 2:
            raster_factor = 4
        elif grid_dim_n > 1:
            raster_factor = 2
        rasterization_remap_grid_dim = (
            cute.size(grid_dim[0]) * raster_factor,
            (cute.size(grid_dim[1]) + raster_factor - 1) // raster_factor,
            cute.size(grid_dim[2]),
        )

        self.kernel(
            mA, mB, mC, sA_layout, sB_layout, sC_layout,
            tiled_copy_A, tiled_copy_B, tiled_copy_C, tiled_mma, raster_factor,
        ).launch(
            grid=rasterization_remap_grid_dim,
            block=[self.num_threads, 1, 1],
            smem=smem_size,
            stream=stream,
        )

    @cute.kernel
    def kernel(
        self,
        mA: cute.Tensor,
        mB: cute.Tensor,
        mC: cute.Tensor,
        sA_layout: cute.ComposedLayout,
        sB_layout: cute.ComposedLayout,
        sC_layout: cute.ComposedLayout,
        tiled_copy_A: cute.TiledCopy,
        tiled_copy_B: cute.TiledCopy,
        tiled_copy_C: cute.TiledCopy,
        tiled_mma: cute.TiledMma,
        rasterization_factor: cutlass.Int32,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, bidz = cute.arch.block_idx()
        grid_dim = cute.ceil_div(mC.shape, (self.bM, self.bN, 1))
        offset_tile_x, offset_tile_y = self.raster_tile(bidx, bidy, rasterization_factor)
        if grid_dim[0] <= offset_tile_x or grid_dim[1] <= offset_tile_y:
            pass
        else:
            tiler_coord = (offset_tile_x, offset_tile_y, None)
            gA = cute.local_tile(mA[None, None, bidz], tiler=self.cta_tiler, coord=tiler_coord, proj=(1, None, 1))
            gB = cute.local_tile(mB[None, None, bidz], tiler=self.cta_tiler, coord=tiler_coord, proj=(None, 1, 1))
            gC = cute.local_tile(mC[None, None, bidz], tiler=self.cta_tiler, coord=tiler_coord, proj=(1, 1, None))

            # The K remainder is taken as the first (shifted) k-tile, so the main loop needs no K checks.
            residual_k = cute.size(mA, mode=[1]) - cutlass.Int32(self.bK) * cute.size(gA, mode=[2])
            gA = cute.domain_offset((0, residual_k, 0), gA)
            gB = cute.domain_offset((0, residual_k, 0), gB)
            # K and N are multiples of vec and the base pointers vec-element aligned (checked on the host).
            gA = cute.make_tensor(gA.iterator.align(self.gmem_copy_bits // 8), gA.layout)
            gB = cute.make_tensor(gB.iterator.align(self.gmem_copy_bits // 8), gB.layout)

            mcA = cute.make_identity_tensor(mA.layout.shape)
            mcB = cute.make_identity_tensor(mB.layout.shape)
            cA = cute.local_tile(mcA[None, None, bidz], tiler=self.cta_tiler, coord=tiler_coord, proj=(1, None, 1))
            cB = cute.local_tile(mcB[None, None, bidz], tiler=self.cta_tiler, coord=tiler_coord, proj=(None, 1, 1))
            cA = cute.domain_offset((0, residual_k, 0), cA)
            cB = cute.domain_offset((0, residual_k, 0), cB)

            smem = cutlass.utils.SmemAllocator()
            sA = smem.allocate_tensor(mA.element_type, sA_layout, 16)
            sB = smem.allocate_tensor(mB.element_type, sB_layout, 16)
            sC = cute.make_tensor(cute.recast_ptr(sA.iterator, dtype=self.c_dtype), sC_layout)

            thr_copy_A = tiled_copy_A.get_slice(tidx)
            thr_copy_B = tiled_copy_B.get_slice(tidx)
            thr_copy_C = tiled_copy_C.get_slice(tidx)
            tAgA = thr_copy_A.partition_S(gA)
            tAsA = thr_copy_A.partition_D(sA)
            tBgB = thr_copy_B.partition_S(gB)
            tBsB = thr_copy_B.partition_D(sB)
            tCsC_epilogue = thr_copy_C.partition_S(sC)
            tCgC_epilogue = thr_copy_C.partition_D(gC)
            tAcA = thr_copy_A.partition_S(cA)
            tBcB = thr_copy_B.partition_S(cB)

            # M (for A) and N (for B) predicates, one per copy vector; K is handled by the branch below.
            tApA = cute.make_rmem_tensor(
                cute.make_layout(
                    (tAgA.shape[0][1], cute.size(tAgA, mode=[1]), cute.size(tAgA, mode=[2])),
                    stride=(cute.size(tAgA, mode=[1]), 1, 0),
                ),
                cutlass.Boolean,
            )
            tBpB = cute.make_rmem_tensor(
                cute.make_layout(
                    (tBsB.shape[0][1], cute.size(tBsB, mode=[1]), cute.size(tBsB, mode=[2])),
                    stride=(cute.size(tBsB, mode=[1]), 1, 0),
                ),
                cutlass.Boolean,
            )
            for rest_v in range(tApA.shape[0]):
                for m in range(tApA.shape[1]):
                    tApA[rest_v, m, 0] = cute.elem_less(tAcA[(0, rest_v), m, 0, 0][0], mA.shape[0])
            for rest_v in range(tBpB.shape[0]):
                for n in range(tBpB.shape[1]):
                    tBpB[rest_v, n, 0] = cute.elem_less(tBcB[(0, rest_v), n, 0, 0][0], mB.shape[0])

            # Prologue: zero smem (predicated-off loads leave zeros), then prefetch num_stages - 1 k-tiles.
            tAsA.fill(0)
            tBsB.fill(0)
            cute.arch.sync_threads()
            num_smem_stages = cute.size(tAsA, mode=[3])
            k_tile_count = cute.size(tAgA, mode=[3])
            k_tile_index = cutlass.Int32(0)

            for k in range(tApA.shape[2]):
                if cute.elem_less(cutlass.Int32(-1), tAcA[0, 0, k, 0][1]):
                    cute.copy(
                        tiled_copy_A,
                        tAgA[None, None, k, k_tile_index],
                        tAsA[None, None, k, 0],
                        pred=tApA[None, None, k],
                    )
            for k in range(tBpB.shape[2]):
                if cute.elem_less(cutlass.Int32(-1), tBcB[0, 0, k, 0][1]):
                    cute.copy(
                        tiled_copy_B,
                        tBgB[None, None, k, k_tile_index],
                        tBsB[None, None, k, 0],
                        pred=tBpB[None, None, k],
                    )
            k_tile_index = k_tile_index + 1
            cute.arch.cp_async_commit_group()

            for k_tile in range(1, num_smem_stages - 1):
                if k_tile == k_tile_count:
                    tApA.fill(0)
                    tBpB.fill(0)
                cute.copy(
                    tiled_copy_A,
                    tAgA[None, None, None, k_tile_index],
                    tAsA[None, None, None, k_tile],
                    pred=tApA,
                )
                cute.copy(
                    tiled_copy_B,
                    tBgB[None, None, None, k_tile_index],
                    tBsB[None, None, None, k_tile],
                    pred=tBpB,
                )
                k_tile_index = k_tile_index + 1
                cute.arch.cp_async_commit_group()

            thr_mma = tiled_mma.get_slice(tidx)
            tCsA = thr_mma.partition_A(sA)
            tCsB = thr_mma.partition_B(sB)
            tCsC = thr_mma.partition_C(sC)
            tCgC = thr_mma.partition_C(gC)
            tCrA = tiled_mma.make_fragment_A(tCsA[None, None, None, 0])
            tCrB = tiled_mma.make_fragment_B(tCsB[None, None, None, 0])
            tCrC = tiled_mma.make_fragment_C(tCgC)
            tCrC.fill(0.0)

            atom_copy_s2r_A = cute.make_copy_atom(
                cute.nvgpu.warp.LdMatrix8x8x16bOp(self.a_major_mode != LayoutEnum.ROW_MAJOR, 4),
                mA.element_type,
            )
            atom_copy_s2r_B = cute.make_copy_atom(
                cute.nvgpu.warp.LdMatrix8x8x16bOp(self.b_major_mode != LayoutEnum.ROW_MAJOR, 4),
                mB.element_type,
            )
            tiled_copy_s2r_A = cute.make_tiled_copy_A(atom_copy_s2r_A, tiled_mma)
            tiled_copy_s2r_B = cute.make_tiled_copy_B(atom_copy_s2r_B, tiled_mma)
            thr_copy_ldmatrix_A = tiled_copy_s2r_A.get_slice(tidx)
            thr_copy_ldmatrix_B = tiled_copy_s2r_B.get_slice(tidx)
            tCsA_copy_view = thr_copy_ldmatrix_A.partition_S(sA)
            tCrA_copy_view = thr_copy_ldmatrix_A.retile(tCrA)
            tCsB_copy_view = thr_copy_ldmatrix_B.partition_S(sB)
            tCrB_copy_view = thr_copy_ldmatrix_B.retile(tCrB)

            smem_pipe_read = 0
            smem_pipe_write = num_smem_stages - 1
            tCsA_p = tCsA_copy_view[None, None, None, smem_pipe_read]
            tCsB_p = tCsB_copy_view[None, None, None, smem_pipe_read]

            num_k_block = cute.size(tCrA, mode=[2])
            if num_k_block > 1:
                cute.arch.cp_async_wait_group(num_smem_stages - 2)
                cute.arch.sync_threads()
                cute.copy(tiled_copy_s2r_A, tCsA_p[None, None, 0], tCrA_copy_view[None, None, 0])
                cute.copy(tiled_copy_s2r_B, tCsB_p[None, None, 0], tCrB_copy_view[None, None, 0])

            # Main loop: gmem->smem pipeline of num_stages, smem->rmem double buffering over k-blocks.
            for k_tile in range(k_tile_count):
                for k_block in cutlass.range(num_k_block, unroll_full=True):
                    if k_block == num_k_block - 1:
                        tCsA_p = tCsA_copy_view[None, None, None, smem_pipe_read]
                        tCsB_p = tCsB_copy_view[None, None, None, smem_pipe_read]
                        cute.arch.cp_async_wait_group(num_smem_stages - 2)
                        cute.arch.sync_threads()

                    k_block_next = (k_block + 1) % num_k_block
                    cute.copy(tiled_copy_s2r_A, tCsA_p[None, None, k_block_next], tCrA_copy_view[None, None, k_block_next])
                    cute.copy(tiled_copy_s2r_B, tCsB_p[None, None, k_block_next], tCrB_copy_view[None, None, k_block_next])

                    if k_block == 0:
                        if k_tile + num_smem_stages - 1 < k_tile_count:
                            cute.copy(
                                tiled_copy_A,
                                tAgA[None, None, None, k_tile_index],
                                tAsA[None, None, None, smem_pipe_write],
                                pred=tApA,
                            )

                    cute.gemm(tiled_mma, tCrC, tCrA[None, None, k_block], tCrB[None, None, k_block], tCrC)

                    if k_block == 0:
                        if k_tile + num_smem_stages - 1 < k_tile_count:
                            cute.copy(
                                tiled_copy_B,
                                tBgB[None, None, None, k_tile_index],
                                tBsB[None, None, None, smem_pipe_write],
                                pred=tBpB,
                            )
                        k_tile_index = k_tile_index + 1
                        cute.arch.cp_async_commit_group()
                        smem_pipe_write = smem_pipe_read
                        smem_pipe_read = smem_pipe_read + 1
                        if smem_pipe_read == num_smem_stages:
                            smem_pipe_read = 0

            cute.arch.cp_async_wait_group(0)
            cute.arch.sync_threads()

            # Epilogue: fp32 accumulators -> output dtype -> smem -> predicated vector stores to gmem.
            tCrD = cute.make_fragment_like(tCrC, self.c_dtype)
            tCrD.store(tCrC.load().to(self.c_dtype))
            cute.autovec_copy(tCrD, tCsC)

            ceilM, ceilN, _ = cute.ceil_div(mC.shape, (self.bM, self.bN, 1))
            mcC = cute.make_identity_tensor(
                (cute.size(ceilM) * self.cta_tiler[0], cute.size(ceilN) * self.cta_tiler[1], 1)
            )
            cC = cute.local_tile(mcC[None, None, bidz], tiler=self.cta_tiler, coord=tiler_coord, proj=(1, 1, None))
            tCcC = thr_copy_C.partition_S(cC)

            tCrC_epilogue = cute.make_fragment_like(tCsC_epilogue)
            cute.arch.sync_threads()
            cute.autovec_copy(tCsC_epilogue, tCrC_epilogue)

            tCpC = cute.make_rmem_tensor(
                cute.make_layout(
                    (
                        tCgC_epilogue.shape[0][1],
                        cute.size(tCgC_epilogue, mode=[1]),
                        cute.size(tCgC_epilogue, mode=[2]),
                    ),
                    stride=(cute.size(tCgC_epilogue, mode=[1]), 1, 0),
                ),
                cutlass.Boolean,
            )
            for rest_v in range(tCpC.shape[0]):
                for m in range(tCpC.shape[1]):
                    tCpC[rest_v, m, 0] = cute.elem_less(tCcC[(0, rest_v), m, 0][0], mC.shape[0])

            for rest_v in range(tCpC.shape[0]):
                for n in range(tCpC.shape[2]):
                    if cute.elem_less(tCcC[(0, rest_v), 0, n][1], mC.shape[1]):
                        cute.copy(
                            tiled_copy_C,
                            tCrC_epilogue[None, None, n],
                            tCgC_epilogue[None, None, n],
                            pred=tCpC[None, None, n],
                        )
        return

    # ---- host-side helpers (plain Python, evaluated while tracing) ----

    def _make_g2s_atom(self, dtype):
        if self.gmem_copy_bits == 128:
            op = cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.cpasync.LoadCacheMode.GLOBAL)
        elif self.gmem_copy_bits >= 32:
            # cp.async.cg exists only for 16 bytes; 4- and 8-byte cp.async use .ca
            op = cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.cpasync.LoadCacheMode.ALWAYS)
        else:
            # cp.async has no 2-byte form: a plain, synchronous load/store (the pipeline's syncs still order it)
            op = cute.nvgpu.CopyUniversalOp()
        return cute.make_copy_atom(op, dtype, num_bits_per_copy=self.gmem_copy_bits)

    def _make_smem_layout_AB(self, dtype, major_mode, copy_bits, smem_tiler):
        major_mode_size = smem_tiler[1] if major_mode == LayoutEnum.ROW_MAJOR else smem_tiler[0]
        major_mode_size = 64 if major_mode_size >= 64 else major_mode_size
        swizzle_bits = int(math.log2(major_mode_size * dtype.width // copy_bits))
        swizzle_bits = min(swizzle_bits, 3)
        layout_atom_outer = (
            cute.make_layout((8, major_mode_size), stride=(major_mode_size, 1))
            if major_mode == LayoutEnum.ROW_MAJOR
            else cute.make_layout((major_mode_size, 8), stride=(1, major_mode_size))
        )
        layout_atom = cute.make_composed_layout(cute.make_swizzle(swizzle_bits, 3, 3), 0, layout_atom_outer)
        return cute.tile_to_shape(layout_atom, smem_tiler, (0, 1, 2))

    def _make_smem_layout_C(self, dtype, major_mode, copy_bits, smem_tiler):
        major_mode_size = smem_tiler[1] if major_mode == LayoutEnum.ROW_MAJOR else smem_tiler[0]
        swizzle_bits = int(math.log2(major_mode_size * dtype.width // copy_bits))
        swizzle_bits = min(swizzle_bits, 3)
        layout_atom_outer = (
            cute.make_layout((8, major_mode_size), stride=(major_mode_size, 1))
            if major_mode == LayoutEnum.ROW_MAJOR
            else cute.make_layout((major_mode_size, 8), stride=(1, major_mode_size))
        )
        layout_atom = cute.make_composed_layout(cute.make_swizzle(swizzle_bits, 3, 4), 0, layout_atom_outer)
        if major_mode == LayoutEnum.COL_MAJOR:
            layout_atom = cute.make_composed_layout(cute.make_swizzle(0, 3, 4), 0, layout_atom_outer)
        return cute.tile_to_shape(layout_atom, smem_tiler, (0, 1))

    def _make_gmem_tiled_copy_AB(self, atom_copy, dtype, major_mode, copy_bits):
        copy_elems = copy_bits // dtype.width
        shape_dim_1 = cute.size(self.bK) // copy_elems
        thread_layout = cute.make_layout((self.num_threads // shape_dim_1, shape_dim_1), stride=(shape_dim_1, 1))
        if major_mode != LayoutEnum.ROW_MAJOR:
            shape_dim_0 = cute.size(self.bM) // copy_elems
            thread_layout = cute.make_layout((shape_dim_0, self.num_threads // shape_dim_0), stride=(1, shape_dim_0))
        value_layout = (
            cute.make_layout((1, copy_elems))
            if major_mode == LayoutEnum.ROW_MAJOR
            else cute.make_layout((copy_elems, 1))
        )
        return cute.make_tiled_copy_tv(atom_copy, thread_layout, value_layout)

    def _make_gmem_tiled_copy_C(self, atom_copy, dtype, major_mode, copy_bits):
        copy_elems = copy_bits // dtype.width
        shape_dim_1 = cute.size(self.bN) // copy_elems
        thread_layout = cute.make_layout((self.num_threads // shape_dim_1, shape_dim_1), stride=(shape_dim_1, 1))
        if major_mode != LayoutEnum.ROW_MAJOR:
            shape_dim_0 = cute.size(self.bM) // copy_elems
            thread_layout = cute.make_layout((shape_dim_0, self.num_threads // shape_dim_0), stride=(1, shape_dim_0))
        value_layout = (
            cute.make_layout((1, copy_elems))
            if major_mode == LayoutEnum.ROW_MAJOR
            else cute.make_layout((copy_elems, 1))
        )
        return cute.make_tiled_copy_tv(atom_copy, thread_layout, value_layout)

    def raster_tile(self, i, j, f):
        new_i = i // f
        new_j = (i % f) + (j * f)
        return (new_i, new_j)


class _SimtGemm:
    """Fallback: one thread per C element, fp32 accumulation over K, every access bounds-checked. Slow, simple."""

    TILE = 16

    def __init__(self, dtype):
        self.dtype = dtype

    @cute.jit
    def __call__(
        self,
        a_ptr: cute.Pointer,
        b_ptr: cute.Pointer,
        c_ptr: cute.Pointer,
        m: cutlass.Int32,
        n: cutlass.Int32,
        k: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        mA = cute.make_tensor(a_ptr, cute.make_ordered_layout((m, k), order=(1, 0)))
        mB = cute.make_tensor(b_ptr, cute.make_ordered_layout((k, n), order=(1, 0)))
        mC = cute.make_tensor(c_ptr, cute.make_ordered_layout((m, n), order=(1, 0)))
        t = self.TILE
        self.kernel(mA, mB, mC).launch(
            grid=[(n + t - 1) // t, (m + t - 1) // t, 1],
            block=[t, t, 1],
            stream=stream,
        )

    @cute.kernel
    def kernel(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
        tx, ty, _ = cute.arch.thread_idx()
        bx, by, _ = cute.arch.block_idx()
        col = bx * self.TILE + tx
        row = by * self.TILE + ty
        if row < mC.shape[0]:
            if col < mC.shape[1]:
                acc = cutlass.Float32(0.0)
                for kk in range(mA.shape[1]):
                    acc = acc + mA[row, kk].to(cutlass.Float32) * mB[kk, col].to(cutlass.Float32)
                mC[row, col] = acc.to(self.dtype)


def _vec_class(K, N, ptrs, elem_bytes):
    """Largest global copy width (elements) such that every copy vector is wholly in or out of bounds and aligned."""
    for vec in (8, 4, 2):
        if K % vec == 0 and N % vec == 0 and all(p % (vec * elem_bytes) == 0 for p in ptrs):
            return vec
    return 1


def _compile(kind, dtype, vec, args):
    key = (kind, dtype, vec)
    fn = _COMPILED.get(key)
    if fn is None:
        if kind == "tensorop":
            fn = cute.compile(_TensorOpGemm(dtype, vec), *args)
        else:
            fn = cute.compile(_SimtGemm(dtype), *args)
        _COMPILED[key] = fn
    return fn


def solve(a, b):
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"bad shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in _TORCH_TO_CUTLASS:
        raise TypeError(f"unsupported dtypes {a.dtype}, {b.dtype}")
    a = a.contiguous()
    b = b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    assert max(M * K, K * N, M * N) < 2**31, "32-bit index math"
    dtype = _TORCH_TO_CUTLASS[a.dtype]
    elem_bytes = a.element_size()
    ptrs = (a.data_ptr(), b.data_ptr(), c.data_ptr())
    vec = _vec_class(K, N, ptrs, elem_bytes)
    kind = "tensorop" if (vec == 8 or _UNALIGNED_PATH != "simt") else "simt"
    align = vec * elem_bytes if kind == "tensorop" else elem_bytes
    pa, pb, pc = (make_ptr(dtype, p, cute.AddressSpace.gmem, assumed_align=align) for p in ptrs)
    with torch.cuda.device(a.device):
        stream = cuda.CUstream(torch.cuda.current_stream(a.device).cuda_stream)
        fn = _compile(kind, dtype, vec if kind == "tensorop" else 1, (pa, pb, pc, M, N, K, stream))
        fn(pa, pb, pc, M, N, K, stream)
    return c
