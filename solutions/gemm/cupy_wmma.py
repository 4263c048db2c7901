"""GEMM C = A @ B in CUDA C++ compiled at run time by NVRTC through CuPy (cupy.RawModule), aimed at H100 (sm_90).

Three kernels share one source, chosen by dtype and torch's float32 matmul precision:

* bf16 / fp16  -> tensor cores through nvcuda::wmma, m16n16k16 fragments, fp32 accumulators.
* "tf32"       -> the same kernel on fp32 storage with m16n16k8 precision::tf32 fragments (operands rounded to
                  TF32 with __float_to_tf32, fp32 accumulate). Used when get_float32_matmul_precision() != "highest".
* fp32 highest -> true fp32 with FFMA (no tensor cores), a classic register-blocked SIMT kernel.

Why this design
---------------
* Block tile 128x128, 8 warps (256 threads), each warp owns a 64x32 sub-tile = 4x2 wmma accumulators (64 fp32
  registers per thread). 128x128 is the largest tile whose accumulators fit under 128 registers/thread with
  __launch_bounds__(256, 2), so two blocks share an SM and hide each other's barriers; smaller tiles re-read A/B
  from L2 more often, larger ones spill or drop to one block per SM.
* K tile 32 for 16-bit types (two k16 MMA steps per stage), 16 for tf32 (same 64 bytes per smem row, so both
  kinds move exactly 512 16-byte chunks per operand per stage = 2 chunks per thread).
* A multi-stage cp.async pipeline (3 stages for 16-bit, 4 for tf32; dynamic shared memory, 57 KB / 75 KB) so the
  global loads of later K tiles overlap the MMAs of the current one, with a single __syncthreads per K tile.
* Shared-memory rows are padded by 16 bytes: row strides of 80 / 272 / 528 bytes put the 8 rows a fragment load
  touches in 8 different 16-byte bank groups (no bank conflicts), while every fragment pointer stays 32-byte
  aligned as wmma::load_matrix_sync requires.
* Edges: arbitrary M, N, K (1, primes, K=1) are handled with zero-filled loads, never with padded copies.
  - "aligned" variant (K and N multiples of the 16-byte vector, all pointers 16-byte aligned): every 16-byte
    chunk is either wholly inside or wholly outside the matrix, so one cp.async with src-size 0 zero-fills the
    outside ones.
  - "unaligned" variant (anything else): element-wise guarded loads written to shared memory directly. Slower,
    but correct for every shape; the pipeline structure (and its barrier) is the same.
  Zeros in the K tail contribute nothing to the dot products; zeros in the M/N tails produce rows/columns that
  are simply not stored.
* Epilogue: wmma accumulator layouts are opaque, so each warp stages a 16x32 fp32 slab through shared memory
  (reusing the pipeline buffers after the main loop), converts to the output dtype, and writes with bounds
  checks, 16-byte vector stores where a whole vector is in range and aligned.
* Grouped rasterisation (GROUP_M = 8 tile rows per group) so consecutive blocks reuse the same B column panels
  and A row panels from L2.
* fp32 "highest": 128x128x8 tile, 256 threads each computing an 8x8 outer-product block with fmaf (true fp32,
  no TF32, no fast-math), A stored k-major in shared memory so each thread reads its 8 A values as 2 float4
  broadcasts; register-prefetch double buffering (global loads for tile k+1 issued before the math of tile k).

Host side: the module is compiled once per (device, mode), lazily, and cached in _KERNELS. Tensors are passed as
raw data_ptr()s (no DLPack wrap, no CuPy allocation, no host sync) and the launch goes on torch's current
stream (cupy.cuda.Stream.from_external), so the launch is CUDA-graph capturable once the module is loaded.
No torch matmul and no cuBLAS anywhere.
"""
import os
import numpy as np
import torch

BACKEND = "cupy"

# Must match the constants in _SRC.
_BM, _BN, _THREADS = 128, 128, 256
# mode -> (kernel name stem, element size in bytes, BK, STAGES) ; STAGES/BK unused (0) for the FFMA kernel.
_MODES = {
    "bf16": ("gemm_bf16", 2, 32, 3),
    "fp16": ("gemm_fp16", 2, 32, 3),
    "tf32": ("gemm_tf32", 4, 16, 4),
    "fp32": ("gemm_fp32", 4, 0, 0),
}

_SRC = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

#define BM 128
#define BN 128
#define NTHREADS 256
#define GROUP_M 8

// ---------------------------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------------------------
template <typename T> __device__ __forceinline__ T to_out(float x);
template <> __device__ __forceinline__ __half to_out<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 to_out<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ float to_out<float>(float x) { return x; }

// 16-byte async copy global -> shared. src_bytes = 0 makes the hardware write 16 zero bytes and read nothing
// (the zero-fill that handles the matrix edges); gmem must still be a valid address, callers pass the base.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// Grouped tile order: GROUP_M consecutive tile rows are walked column by column, so blocks resident at the same
// time share B column panels and A row panels in L2.
__device__ __forceinline__ void tile_coords(int M, int N, int& m0, int& n0) {
    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int pid = blockIdx.x;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = (pid / per_group) * GROUP_M;
    const int gsize = min(tiles_m - first_m, GROUP_M);
    const int in_group = pid % per_group;
    m0 = (first_m + in_group % gsize) * BM;
    n0 = (in_group / gsize) * BN;
}

// ---------------------------------------------------------------------------------------------------------------
// Tensor-core kernel (wmma), storage type T. Per-type configuration:
//   BK     K extent of one pipeline stage
//   STAGES cp.async pipeline depth
//   FK     K extent of one wmma fragment (16 for 16-bit, 8 for tf32)
// ---------------------------------------------------------------------------------------------------------------
template <typename T> struct Cfg;
template <> struct Cfg<__half>        { static constexpr int BK = 32, STAGES = 3, FK = 16; typedef __half frag_t;        static constexpr bool TF32 = false; };
template <> struct Cfg<__nv_bfloat16> { static constexpr int BK = 32, STAGES = 3, FK = 16; typedef __nv_bfloat16 frag_t; static constexpr bool TF32 = false; };
template <> struct Cfg<float>         { static constexpr int BK = 16, STAGES = 4, FK = 8;  typedef wmma::precision::tf32 frag_t; static constexpr bool TF32 = true; };

template <typename T, bool ALIGNED>
__device__ __forceinline__ void wmma_gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                                          int M, int N, int K) {
    typedef Cfg<T> CF;
    constexpr int BK = CF::BK, STAGES = CF::STAGES, FK = CF::FK;
    constexpr int VEC = 16 / (int)sizeof(T);      // elements per 16-byte chunk
    constexpr int LDA = BK + VEC;                 // padded smem row strides (see module docstring)
    constexpr int LDB = BN + VEC;
    constexpr int A_STAGE = BM * LDA;             // elements per stage
    constexpr int B_STAGE = BK * LDB;
    constexpr int A_CHUNKS = BM * BK / VEC / NTHREADS;   // 16-byte chunks per thread per stage
    constexpr int B_CHUNKS = BK * BN / VEC / NTHREADS;
    static_assert(A_CHUNKS * VEC * NTHREADS == BM * BK, "A tile must split evenly");
    static_assert(B_CHUNKS * VEC * NTHREADS == BK * BN, "B tile must split evenly");
    static_assert(BK % FK == 0, "BK must be a multiple of the fragment K");
    static_assert(STAGES >= 2, "pipeline needs at least two stages");

    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* sA = reinterpret_cast<T*>(smem_raw);
    T* sB = sA + STAGES * A_STAGE;

    int m0, n0;
    tile_coords(M, N, m0, n0);
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int wm = warp >> 2;      // 0..1 : 64-row slab
    const int wn = warp & 3;       // 0..3 : 32-col slab

    const T zero = to_out<T>(0.0f);

    // Issue the loads of K tile starting at k0 into pipeline stage `stage`.
    auto load_stage = [&](int stage, int k0) {
        T* dA = sA + stage * A_STAGE;
        T* dB = sB + stage * B_STAGE;
#pragma unroll
        for (int p = 0; p < A_CHUNKS; ++p) {
            const int c = tid + p * NTHREADS;
            const int r = c / (BK / VEC);
            const int kc = (c % (BK / VEC)) * VEC;
            const int gr = m0 + r, gk = k0 + kc;
            T* dst = dA + r * LDA + kc;
            if (ALIGNED) {
                // K % VEC == 0, so the chunk is wholly in or wholly out of range.
                const bool v = (gr < M) && (gk < K);
                const T* src = v ? (A + (long long)gr * K + gk) : A;
                cp_async16(dst, src, v);
            } else {
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    dst[e] = (gr < M && gk + e < K) ? A[(long long)gr * K + gk + e] : zero;
            }
        }
#pragma unroll
        for (int p = 0; p < B_CHUNKS; ++p) {
            const int c = tid + p * NTHREADS;
            const int r = c / (BN / VEC);
            const int nc = (c % (BN / VEC)) * VEC;
            const int gk = k0 + r, gn = n0 + nc;
            T* dst = dB + r * LDB + nc;
            if (ALIGNED) {
                const bool v = (gk < K) && (gn < N);
                const T* src = v ? (B + (long long)gk * N + gn) : B;
                cp_async16(dst, src, v);
            } else {
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    dst[e] = (gk < K && gn + e < N) ? B[(long long)gk * N + gn + e] : zero;
            }
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, FK, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    const int num_k = (K + BK - 1) / BK;

    // Prologue: STAGES-1 tiles in flight. Always commit (possibly empty) groups so that the group count stays
    // in lock-step with the tile index and wait_group<STAGES-2> below always means "tile kt has landed".
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < num_k) load_stage(s, s * BK);
        cp_async_commit();
    }

    for (int kt = 0; kt < num_k; ++kt) {
        cp_async_wait<STAGES - 2>();
        // One barrier per K tile: (1) makes tile kt (cp.async or plain stores) visible to every warp, and
        // (2) guarantees every warp finished the math of tile kt-1, whose stage the loads below overwrite.
        __syncthreads();
        const int nk = kt + STAGES - 1;
        if (nk < num_k) load_stage(nk % STAGES, nk * BK);
        cp_async_commit();

        const T* tA = sA + (kt % STAGES) * A_STAGE + (wm * 64) * LDA;
        const T* tB = sB + (kt % STAGES) * B_STAGE + wn * 32;
#pragma unroll
        for (int kk = 0; kk < BK; kk += FK) {
            wmma::fragment<wmma::matrix_a, 16, 16, FK, typename CF::frag_t, wmma::row_major> af[4];
            wmma::fragment<wmma::matrix_b, 16, 16, FK, typename CF::frag_t, wmma::row_major> bf[2];
#pragma unroll
            for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(af[i], tA + i * 16 * LDA + kk, LDA);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(bf[j], tB + kk * LDB + j * 16, LDB);
            if constexpr (CF::TF32) {
                // Round-to-nearest fp32 -> tf32 (otherwise the hardware truncates the low mantissa bits).
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int t = 0; t < af[i].num_elements; ++t) af[i].x[t] = wmma::__float_to_tf32(af[i].x[t]);
#pragma unroll
                for (int j = 0; j < 2; ++j)
#pragma unroll
                    for (int t = 0; t < bf[j].num_elements; ++t) bf[j].x[t] = wmma::__float_to_tf32(bf[j].x[t]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
        }
    }

    // Epilogue. Drain the (empty) trailing groups and let every warp finish reading the pipeline buffers before
    // they are reused as per-warp fp32 staging slabs (16 x 32, row stride 36 floats = 144 B: 16-byte aligned
    // rows for float4 reads, conflict-free, and 32-byte aligned fragment pointers for store_matrix_sync).
    cp_async_wait<0>();
    __syncthreads();
    constexpr int LDS = 36;
    float* stg = reinterpret_cast<float*>(smem_raw) + warp * (16 * LDS);
    const int lane = tid & 31;
    const int r = lane >> 1;              // row of the 16x32 slab this lane writes
    const int c = (lane & 1) * 16;        // first of its 16 columns
    const int gc = n0 + wn * 32 + c;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::store_matrix_sync(stg + j * 16, acc[i][j], LDS, wmma::mem_row_major);
        __syncwarp();
        const int gr = m0 + wm * 64 + i * 16 + r;
        if (gr < M) {
            float v[16];
            const float4* s4 = reinterpret_cast<const float4*>(stg + r * LDS + c);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float4 t = s4[q];
                v[4 * q + 0] = t.x; v[4 * q + 1] = t.y; v[4 * q + 2] = t.z; v[4 * q + 3] = t.w;
            }
            T* dst = C + (long long)gr * N + gc;
#pragma unroll
            for (int ch = 0; ch < 16; ch += VEC) {
                if (ALIGNED && gc + ch + VEC <= N) {
                    // Whole 16-byte vector in range; aligned because N % VEC == 0, gc % VEC == 0, C aligned.
                    alignas(16) T o[VEC];
#pragma unroll
                    for (int e = 0; e < VEC; ++e) o[e] = to_out<T>(v[ch + e]);
                    *reinterpret_cast<uint4*>(dst + ch) = *reinterpret_cast<const uint4*>(o);
                } else {
#pragma unroll
                    for (int e = 0; e < VEC; ++e)
                        if (gc + ch + e < N) dst[ch + e] = to_out<T>(v[ch + e]);
                }
            }
        }
        __syncwarp();   // the slab is overwritten by the next i
    }
}

// ---------------------------------------------------------------------------------------------------------------
// True-fp32 SIMT kernel (FFMA), for torch.get_float32_matmul_precision() == "highest".
// 128x128x8 tile, thread (ty, tx) in a 16x16 grid owns rows {ty*4+i, 64+ty*4+i} x cols {tx*4+j, 64+tx*4+j}:
// the two 4-wide halves make every shared-memory read a float4 (A broadcast within a half-warp, B contiguous).
// ---------------------------------------------------------------------------------------------------------------
template <bool ALIGNED>
__device__ __forceinline__ void ffma_gemm(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N, int K) {
    constexpr int BK = 8;
    constexpr int LDS = BM + 4;   // keeps float4 alignment; spreads the transposed A stores over banks
    __shared__ __align__(16) float sA[2][BK][LDS];   // A^T tile: sA[k][m]
    __shared__ __align__(16) float sB[2][BK][LDS];   // B tile:   sB[k][n]

    int m0, n0;
    tile_coords(M, N, m0, n0);
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;

    // Global->register loader: A: row tid/2, k (tid&1)*4..+3 ; B: k tid/32, cols (tid&31)*4..+3.
    const int a_r = tid >> 1, a_k = (tid & 1) * 4;
    const int b_k = tid >> 5, b_n = (tid & 31) * 4;
    float ra[4], rb[4];
    auto gload = [&](int k0) {
        const int gr = m0 + a_r, gk = k0 + a_k;
        if (ALIGNED) {   // K % 4 == 0: the 4-vector is wholly in or out
            if (gr < M && gk < K) {
                float4 t = *reinterpret_cast<const float4*>(A + (long long)gr * K + gk);
                ra[0] = t.x; ra[1] = t.y; ra[2] = t.z; ra[3] = t.w;
            } else { ra[0] = ra[1] = ra[2] = ra[3] = 0.0f; }
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) ra[e] = (gr < M && gk + e < K) ? A[(long long)gr * K + gk + e] : 0.0f;
        }
        const int bk = k0 + b_k, bn = n0 + b_n;
        if (ALIGNED) {   // N % 4 == 0
            if (bk < K && bn < N) {
                float4 t = *reinterpret_cast<const float4*>(B + (long long)bk * N + bn);
                rb[0] = t.x; rb[1] = t.y; rb[2] = t.z; rb[3] = t.w;
            } else { rb[0] = rb[1] = rb[2] = rb[3] = 0.0f; }
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) rb[e] = (bk < K && bn + e < N) ? B[(long long)bk * N + bn + e] : 0.0f;
        }
    };
    auto sstore = [&](int s) {
#pragma unroll
        for (int e = 0; e < 4; ++e) sA[s][a_k + e][a_r] = ra[e];
        *reinterpret_cast<float4*>(&sB[s][b_k][b_n]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const int num_k = (K + BK - 1) / BK;
    gload(0);
    sstore(0);
    __syncthreads();
    for (int kt = 0; kt < num_k; ++kt) {
        const int s = kt & 1;
        const bool more = kt + 1 < num_k;
        if (more) gload((kt + 1) * BK);   // in flight during the math below
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&sA[s][k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&sA[s][k][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&sB[s][k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&sB[s][k][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        // Stage s^1 was last read in iteration kt-1, which every thread finished before the barrier ending it.
        if (more) sstore(s ^ 1);
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int gr = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (gr >= M) continue;
        float* crow = C + (long long)gr * N;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int gc = n0 + h * 64 + tx * 4;
            const float* v = &acc[i][h * 4];
            if (ALIGNED && gc + 4 <= N) {
                *reinterpret_cast<float4*>(crow + gc) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (gc + e < N) crow[gc + e] = v[e];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Entry points. _a = aligned variant (K % VEC == 0, N % VEC == 0, 16-byte aligned pointers), _u = any shape.
// ---------------------------------------------------------------------------------------------------------------
#define WMMA_ENTRY(NAME, T, AL)                                                                                  \
    extern "C" __global__ void __launch_bounds__(NTHREADS, 2)                                                    \
    NAME(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K) {             \
        wmma_gemm<T, AL>(A, B, C, M, N, K);                                                                      \
    }
WMMA_ENTRY(gemm_bf16_a, __nv_bfloat16, true)
WMMA_ENTRY(gemm_bf16_u, __nv_bfloat16, false)
WMMA_ENTRY(gemm_fp16_a, __half, true)
WMMA_ENTRY(gemm_fp16_u, __half, false)
WMMA_ENTRY(gemm_tf32_a, float, true)
WMMA_ENTRY(gemm_tf32_u, float, false)

extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
gemm_fp32_a(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    ffma_gemm<true>(A, B, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
gemm_fp32_u(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    ffma_gemm<false>(A, B, C, M, N, K);
}
"""

# (device index, mode) -> (aligned kernel, unaligned kernel, dynamic smem bytes)
_KERNELS = {}
# stream handle -> cupy Stream wrapping it (re-used so solve() creates no objects per call on a steady stream)
_STREAMS = {}


def _smem_bytes(mode):
    """Dynamic shared memory of the wmma kernel: STAGES * (A stage + B stage), padded rows (see _SRC)."""
    _, esize, bk, stages = _MODES[mode]
    if stages == 0:
        return 0  # FFMA kernel uses static shared memory only
    vec = 16 // esize
    return stages * (_BM * (bk + vec) + bk * (_BN + vec)) * esize


def _include_options():
    """NVRTC needs <mma.h>, which includes "crt/mma.h". The headers CuPy finds first (pip's nvidia/cu13/include)
    lack the crt/ folder on some machines (seen on the H200 image, CUDA 13), so point NVRTC at a toolkit that has
    it. Nothing is added where CuPy's own headers suffice."""
    import shutil
    roots = [os.environ.get("CUDA_PATH", ""), os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    for root in filter(None, roots):
        for inc in (os.path.join(root, "include"), os.path.join(root, "targets", "x86_64-linux", "include")):
            if os.path.isfile(os.path.join(inc, "crt", "mma.h")):
                return ("-I" + inc,)
    return ()


def _get_kernels(dev, mode):
    key = (dev, mode)
    ks = _KERNELS.get(key)
    if ks is None:
        import cupy

        stem = _MODES[mode][0]
        with cupy.cuda.Device(dev):
            # No --use_fast_math: the fp32 path must be IEEE fmaf; the tensor-core paths do not need it.
            mod = cupy.RawModule(code=_SRC, options=("-std=c++17", *_include_options()))
            ka = mod.get_function(stem + "_a")
            ku = mod.get_function(stem + "_u")
            smem = _smem_bytes(mode)
            if smem > 48 * 1024:
                # Opt in to > 48 KB dynamic shared memory (H100 allows up to 227 KB per block).
                ka.max_dynamic_shared_size_bytes = smem
                ku.max_dynamic_shared_size_bytes = smem
        ks = (ka, ku, smem)
        _KERNELS[key] = ks
    return ks


def _mode(dtype):
    if dtype == torch.bfloat16:
        return "bf16"
    if dtype == torch.float16:
        return "fp16"
    if dtype == torch.float32:
        return "fp32" if torch.get_float32_matmul_precision() == "highest" else "tf32"
    raise TypeError(f"cupy_wmma: unsupported dtype {dtype}")


class _StreamHandle:
    """A raw cudaStream_t speaking the CUDA stream protocol, for cupy.cuda.Stream.from_external."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def _stream(handle):
    """CuPy view of torch's current stream. Wrapping creates no CUDA object and makes no CUDA call, so it is safe
    while torch captures a graph; cached because the same stream handles recur."""
    s = _STREAMS.get(handle)
    if s is None:
        import cupy

        if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy >= 14; ExternalStream is deprecated there
            s = cupy.cuda.Stream.from_external(_StreamHandle(handle))
        else:
            s = cupy.cuda.ExternalStream(handle)
        _STREAMS[handle] = s
    return s


def solve(a, b):
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], (a.shape, b.shape)
    assert a.dtype == b.dtype and a.is_cuda and b.is_cuda and a.device == b.device
    a = a.contiguous()
    b = b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()

    mode = _mode(a.dtype)
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    ka, ku, smem = _get_kernels(dev, mode)

    vec = 16 // a.element_size()
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    aligned = K % vec == 0 and N % vec == 0 and (pa | pb | pc) % 16 == 0
    kern = ka if aligned else ku

    tiles = ((M + _BM - 1) // _BM) * ((N + _BN - 1) // _BN)
    # The kernels index with int (element offsets in 64-bit) and a 1-D grid of tiles.
    assert max(M, N, K) < 2**31 and tiles < 2**31, (M, N, K)
    import cupy

    stream = _stream(torch.cuda.current_stream(a.device).cuda_stream)
    with cupy.cuda.Device(dev), stream:
        kern((tiles, 1, 1), (_THREADS, 1, 1),
             (np.uint64(pa), np.uint64(pb), np.uint64(pc), np.int32(M), np.int32(N), np.int32(K)),
             shared_mem=smem)
    return c
