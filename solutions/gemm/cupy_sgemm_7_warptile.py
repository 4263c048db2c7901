"""CUDA SGEMM ladder, rung 7 of 7: warp tiling, double-buffered shared memory, BK = 16. C = A @ B in true fp32
(FFMA, no TF32), CUDA C++ compiled at run time by NVRTC through CuPy, launched on torch's current stream.

What this rung adds over rung 6 (vectorised; same 128 x 128 block tile, 256 threads, 8 x 8 outputs per thread):
* Warp tiling: the 8 warps split the block tile 2 (M) x 4 (N) into 64 x 32 warp tiles; inside one, the 32 lanes
  form an 8 x 4 grid and each lane owns 2 x 2 sub-blocks of 4 x 4 (rows lm*4 + {0, 32}, columns ln*4 + {0, 16}).
  A warp's float4 shared-memory reads then cover 128 contiguous bytes of A and 64 of B: one wavefront each, 4 per
  k step instead of rung 6's 6, and a warp's working set stays in a compact 64 x 32 region.
* Double buffering with one barrier per K step: the next tile's global loads are issued before the math on the
  current one. B goes global -> shared directly with cp.async (16 bytes, zero-filled past the edges: no
  registers); A comes through 8 registers because it is transposed on the way in. The loads' latency hides
  behind 16 x 64 fmaf per thread, and rung 6's second barrier per step is gone.
* BK = 16: half as many steps (and barriers) per K; 33 KB of static shared memory for both stages.
* Grouped tile order (8 tile rows per group, 1-D grid) so blocks resident together share A and B panels in L2.
Split-K for the decode shapes as in rungs 5 and 6 (slices on grid y).

Alignment: the fast kernel (_a: float4 loads of A, cp.async of B, float4 stores) needs K % 4 == 0, N % 4 == 0 and
16-byte aligned A, B, C; then every 16-byte chunk is wholly inside or outside the matrix (slices start on multiples
of 16). Anything else runs the same pipeline with element-wise guarded scalar loads and stores (_u), B written to
the free shared-memory stage directly.

Floor (the same for every rung; H100 SXM: dense fp32 FFMA peak ~67 TFLOP/s, HBM ~3.0 TB/s). All six benchmark
shapes are compute-bound by a wide margin, so the floor is FLOP / peak:

    shape (M, N, K)        FLOP / 67 TFLOP/s    bytes / 3.0 TB/s
    4096, 4096, 4096         2.05 ms              0.067 ms
    8192, 8192, 8192        16.4  ms              0.268 ms
    16384, 7168, 2048        7.18 ms              0.221 ms
    4096, 14336, 4096        7.18 ms              0.179 ms
    128, 14336, 4096         0.224 ms             0.081 ms
    128, 4096, 14336         0.224 ms             0.081 ms

cuBLAS's true-fp32 SGEMM itself reaches roughly 70-80% of that peak, so "fraction of cuBLAS" below is measured
against cuBLAS, not against the floor.

Prediction: ~80-90% of cuBLAS on the large shapes, ~1.2-1.3x rung 6 (the walk-through's warp-tiled kernel
reached 93.7% of cuBLAS on an A6000; an H100's cuBLAS SGEMM is harder to match with plain FFMA code). Decode
shapes: ~70-80% (split 8 and 2 ways).
Geomean prediction: ~0.8x cuBLAS.
Measured: short of the 0.94x asked on an H100 and an H200 (the figures: docs/benchmarks.md, "Shipped solutions" and
the dated entries). Where the rest goes, from Nsight Compute at 4096^3 on an H200 against cuBLAS's own SIMT kernel
(sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma: a 128 x 256 tile of our C,
8 x 16 outputs a thread, one block of 8 warps an SM at 254 registers; this rung two blocks at 125):
* DRAM is not the floor (2-3% of its peak for both; L2 hit rates 82% and 89%).
* Both issue the same 2.15 G FFMA warp instructions; this kernel 5% more instructions in all (2.55 G against 2.43 G,
  140 M shared-memory loads against 101 M: 8 x 8 outputs a thread read 4 float4 for 64 FMAs, 8 x 16 read 6 for 128).
* Its schedulers issue in 83% of cycles against cuBLAS's 91% (3.8 warps each against 2.0): stalls per issued
  instruction on the barrier 0.44 against 0.09 and on dispatch 0.36 against 0.10; short scoreboard (shared loads)
  0.18 against 0.19.
Fewer instructions and fewer barrier and dispatch waits per FMA are what cuBLAS has and this rung lacks; the sweeps
below did not find them in CUDA C. Dispatch stalls follow ptxas's register allocation (under this rung's 128-register
bound the accumulators move between registers): a rewrite with 5% fewer instructions (addresses by pointer
increments, K checked on the last tile only) doubled them (0.81 against 0.36) and ran 6% slower.
Tried and not kept (H200, 2026-11-29; the kernel rewritten over its pipeline, do_bench against cuBLAS on the six
shapes, two rounds, geomean against this rung's 0.884 and 0.882 in the same runs): the rewrite at this rung's own
settings 0.873; 3 stages of cp.async groups 0.838; A by 4-byte cp.async straight into A^T (no registers)
0.754-0.797; BK 8 with 3 or 4 stages 0.785-0.797; no register bound (one block an SM) 0.837; cuBLAS's own tile
(128 x 256, 8 x 16 a thread, one block an SM) with BK 16 and 2 stages 0.889 (3 stages 0.870), with BK 8 and 2-4
stages 0.829-0.841: the larger thread tile alone gained 1%, its schedulers issuing in 80% of cycles. Then: the lean
addressing above 0.835, on cuBLAS's tile 0.881 (this rung 0.882 in that run); the FMA loops in the other order 0.871,
on cuBLAS's tile 0.891, and the next k-step's fragments loaded before this one's FMAs 0.860 (this rung 0.884).
Tried and not kept (2026-11-26, H100): this kernel rewritten over its tile sizes and swept against cuBLAS (CUDA
events, back to back, no L2 flush) on the six shapes. Geomeans: 128x128x16 with 2x4 warps and 8x8 per thread
(this rung's layout, 128 registers and 32 bytes spilled under the same 2-blocks-per-SM bound) 0.759, the same
without the bound 0.808; 8x16 per thread: 128x128x16 0.804, 128x128x8 0.710, 128x256x8 0.776, 256x128x8 0.620,
64x256x16 0.824; 128x64x16 with 8x8 per thread 0.822. The best, 64x256x16, read 0.846 in `gauntlet eval` at the
defaults against this rung's 0.879 in the same call: larger thread tiles alone did not pay in that rewrite, which
lost more to its code generation than the tiles gained.
"""
import numpy as np
import torch

BACKEND = "cupy"
DTYPES = ("float32",)   # true fp32 (the judge sets matmul precision "highest"); no TF32, no 16-bit

_NAMES = ("ladder7_warptile_a", "ladder7_warptile_u")
_BM, _BN, _BK, _THREADS = 128, 128, 16, 256   # must match _SRC

_SRC = r"""
#define BM 128
#define BN 128
#define BK 16
#define NTHREADS 256
#define LDA (BM + 4)   // padded A^T row (float4-aligned)
#define GROUP_M 8

// 16-byte async copy global -> shared; src-size 0 writes 16 zero bytes and reads nothing (the edges), gmem must
// still be a valid address (callers pass the matrix base).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(n) : "memory");
}
// Commit and wait for all of this thread's copies; a __syncthreads after it makes them visible to the block.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

template <bool ALIGNED>
__device__ __forceinline__ void warptile_gemm(const float* __restrict__ A, const float* __restrict__ B,
                                              float* __restrict__ C, int M, int N, int K, int kchunk, int atomic) {
    __shared__ __align__(16) float As[2][BK][LDA];   // A^T tiles: As[stage][k][m]
    __shared__ __align__(16) float Bs[2][BK][BN];    // B tiles:   Bs[stage][k][n]
    const int tid = threadIdx.x;

    // Grouped tile order: GROUP_M tile rows are walked column by column.
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int pid = blockIdx.x;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (pid / per_group) * GROUP_M;
    const int gsize = min(tiles_m - first_m, GROUP_M);
    const int in_group = pid % per_group;
    const int m0 = (first_m + in_group % gsize) * BM;
    const int n0 = (in_group / gsize) * BN;
    const int kbeg = blockIdx.y * kchunk;
    const int kend = min(K, kbeg + kchunk);

    // Warp tile 64 x 32 at (wm*64, wn*32); lane (lm, ln) of an 8 x 4 grid owns rows arow + {0..3, 32..35} and
    // columns bcol + {0..3, 16..19} of it.
    const int warp = tid >> 5, lane = tid & 31;
    const int arow = (warp >> 2) * 64 + (lane >> 2) * 4;
    const int bcol = (warp & 3) * 32 + (lane & 3) * 4;

    // Loaders. A tile 128 x 16 = 512 float4, B tile 16 x 128 = 512 float4: two of each per thread.
    float ra[2][4];
    auto load_a = [&](int k0) {
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const int c = tid + p * NTHREADS;
            const int gr = m0 + (c >> 2), gk = k0 + (c & 3) * 4;
            if (ALIGNED) {   // K % 4 == 0, kend % 4 == 0: wholly in or out
                if (gr < M && gk < kend) {
                    const float4 t = *reinterpret_cast<const float4*>(A + (long long)gr * K + gk);
                    ra[p][0] = t.x; ra[p][1] = t.y; ra[p][2] = t.z; ra[p][3] = t.w;
                } else { ra[p][0] = ra[p][1] = ra[p][2] = ra[p][3] = 0.0f; }
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    ra[p][e] = (gr < M && gk + e < kend) ? A[(long long)gr * K + gk + e] : 0.0f;
            }
        }
    };
    auto store_a = [&](int s) {
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const int c = tid + p * NTHREADS;
            const int r = c >> 2, kc = (c & 3) * 4;
#pragma unroll
            for (int e = 0; e < 4; ++e) As[s][kc + e][r] = ra[p][e];
        }
    };
    auto load_b = [&](int s, int k0) {   // straight into stage s, which nobody reads until the next barrier
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const int c = tid + p * NTHREADS;
            const int kr = c >> 5, nc = (c & 31) * 4;
            const int gk = k0 + kr, gn = n0 + nc;
            float* dst = &Bs[s][kr][nc];
            if (ALIGNED) {   // N % 4 == 0: wholly in or out
                const bool v = gk < kend && gn < N;
                cp_async16(dst, v ? (const void*)(B + (long long)gk * N + gn) : (const void*)B, v);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) dst[e] = (gk < kend && gn + e < N) ? B[(long long)gk * N + gn + e] : 0.0f;
            }
        }
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const int num_k = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
    if (num_k > 0) {
        load_a(kbeg);
        load_b(0, kbeg);
        store_a(0);
        if (ALIGNED) cp_async_wait_all();
    }
    __syncthreads();

    for (int t = 0; t < num_k; ++t) {
        const int cur = t & 1;
        const bool more = t + 1 < num_k;
        // Stage cur^1 was last read in step t-1, which every thread finished before the barrier ending it.
        if (more) {
            load_a(kbeg + (t + 1) * BK);
            load_b(cur ^ 1, kbeg + (t + 1) * BK);
        }
#pragma unroll
        for (int d = 0; d < BK; ++d) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][d][arow]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][d][arow + 32]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][d][bcol]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][d][bcol + 16]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {
            store_a(cur ^ 1);
            if (ALIGNED) cp_async_wait_all();
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int gr = m0 + arow + (i >> 2) * 32 + (i & 3);
        if (gr >= M) continue;
        float* crow = C + (long long)gr * N;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gc = n0 + bcol + h * 16;
            const float* v = &acc[i][h * 4];
            if (ALIGNED && !atomic && gc + 4 <= N) {
                *reinterpret_cast<float4*>(crow + gc) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    if (gc + e < N) {
                        if (atomic) atomicAdd(crow + gc + e, v[e]);
                        else crow[gc + e] = v[e];
                    }
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
ladder7_warptile_a(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K, int kchunk, int atomic) {
    warptile_gemm<true>(A, B, C, M, N, K, kchunk, atomic);
}
extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
ladder7_warptile_u(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K, int kchunk, int atomic) {
    warptile_gemm<false>(A, B, C, M, N, K, kchunk, atomic);
}
"""


# device index -> compiled kernels (compiled once per process, on the first call, never inside a timed call)
_KERNELS = {}
# stream handle -> CuPy view of it (re-used: solve() makes no CuPy objects on a steady stream)
_STREAMS = {}


class _StreamHandle:
    """A raw cudaStream_t speaking the CUDA stream protocol, for cupy.cuda.Stream.from_external."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def _stream(handle):
    """CuPy view of torch's current stream: the kernel is ordered with torch's work and graph-capturable."""
    s = _STREAMS.get(handle)
    if s is None:
        import cupy

        if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy >= 14; ExternalStream is deprecated there
            s = cupy.cuda.Stream.from_external(_StreamHandle(handle))
        else:
            s = cupy.cuda.ExternalStream(handle)
        _STREAMS[handle] = s
    return s


def _kernels(dev):
    ks = _KERNELS.get(dev)
    if ks is None:
        import cupy

        with cupy.cuda.Device(dev):
            # No --use_fast_math: true IEEE fp32 fmaf.
            mod = cupy.RawModule(code=_SRC, options=("-std=c++17",))
            ks = tuple(mod.get_function(name) for name in _NAMES)
        _KERNELS[dev] = ks
    return ks


def _prepare(a, b):
    """Checks the operands and makes them contiguous (views from the judge may be offset: no alignment is
    assumed). Returns (a, b, M, N, K, device index)."""
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], (a.shape, b.shape)
    assert a.dtype == torch.float32 and b.dtype == torch.float32 and a.is_cuda and a.device == b.device
    a, b = a.contiguous(), b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    # The kernels take int dims and 64-bit element offsets.
    assert max(M, N, K) < 2**31, (M, N, K)
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    return a, b, M, N, K, dev


def _launch(kern, dev, grid, block, a, b, c, M, N, K, *extra):
    """Launch on torch's current stream with raw pointers (no DLPack wrap, no CuPy allocation, no host sync)."""
    import cupy

    stream = _stream(torch.cuda.current_stream(a.device).cuda_stream)
    args = (np.uint64(a.data_ptr()), np.uint64(b.data_ptr()), np.uint64(c.data_ptr()),
            np.int32(M), np.int32(N), np.int32(K), *(np.int32(x) for x in extra))
    with cupy.cuda.Device(dev), stream:
        kern(grid, (block, 1, 1) if isinstance(block, int) else block, args)


# device index -> SM count (for the split-K rule below)
_SMS = {}


def _split_k(dev, tiles, K, bk, per_sm):
    """K slices (gridDim z/y) for grids too small to fill the GPU: the M = 128 decode shapes give only 32 or 112
    128 x 128 tiles for 132 SMs. When the tiles alone are fewer than the SMs, K is cut into slices of a multiple
    of BK (at least 512 long, at most 32 of them) so the grid comes near `per_sm` resident blocks per SM; each
    slice adds its partial sums into a zeroed C with atomicAdd (fp32 adds in some order: true fp32, not
    bit-reproducible). Returns (slices, slice length)."""
    sms = _SMS.get(dev)
    if sms is None:
        sms = _SMS[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    if tiles >= sms:
        return 1, K
    split = max(1, min(per_sm * sms // tiles, K // 512, 32))
    chunk = -(-K // split)
    chunk = -(-chunk // bk) * bk      # a multiple of BK: slices start on float4 boundaries
    return -(-K // chunk), chunk      # no empty slice


def solve(a, b):
    a, b, M, N, K, dev = _prepare(a, b)
    if M == 0 or N == 0 or K == 0:
        return torch.zeros((M, N), dtype=torch.float32, device=a.device)
    k_aligned, k_any = _kernels(dev)
    tiles = ((M + _BM - 1) // _BM) * ((N + _BN - 1) // _BN)
    split, chunk = _split_k(dev, tiles, K, _BK, per_sm=2)
    # split > 1 adds into C, so C starts at zero; otherwise every element is written once.
    c = (torch.zeros if split > 1 else torch.empty)((M, N), dtype=torch.float32, device=a.device)
    aligned = K % 4 == 0 and N % 4 == 0 and (a.data_ptr() | b.data_ptr() | c.data_ptr()) % 16 == 0
    assert tiles < 2**31 and split < 65536, (M, N, K)
    _launch(k_aligned if aligned else k_any, dev, (tiles, split, 1), _THREADS, a, b, c, M, N, K,
            chunk, int(split > 1))
    return c
