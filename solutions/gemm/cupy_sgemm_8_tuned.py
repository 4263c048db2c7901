"""CUDA SGEMM ladder, rung 8 of 8: rung 7's warp-tiled, double-buffered kernel, its tile sizes chosen by
measurement (the walk-through's autotuning step). C = A @ B in true fp32 (FFMA, no TF32), CUDA C++ compiled at
run time by NVRTC through CuPy, launched on torch's current stream.

What this rung adds over rung 7 (128 x 128 x 16 tile, 256 threads, 8 x 8 outputs per thread):
* The kernel is written once over its tile sizes (`source(cfg)`): block tile BM x BN x BK, a grid of WARPS_M x
  WARPS_N warps, and per lane SUB_M x SUB_N sub-blocks of 4 x 4 (a lane's rows lie 32 apart, its columns 16 apart,
  as in rung 7: every float4 read of shared memory is one wavefront or a broadcast).
* Larger thread tiles. Per k step a thread reads SUB_M + SUB_N float4s from shared memory for 16 * SUB_M * SUB_N
  FMAs: 4 reads per 64 FMAs at rung 7's 8 x 8, 6 per 128 at 8 x 16. Shared-memory bandwidth, not the FMA pipes,
  is what an FFMA kernel at 8 x 8 runs into on an H100 (each SM's FMA rate is 128 per clock, its shared memory
  128 bytes per clock: at 16 FMAs per float4 read the two meet).
* The configuration (CONFIG below) is the fastest of a sweep: `python scripts/sgemm_sweep.py` on a GPU checks
  each configuration in CONFIGS and times it against cuBLAS on the benchmark shapes (numbers below).
Split-K for the decode shapes as in rungs 5 to 7.

Alignment: as rung 7: the fast kernel (_a: float4 loads of A, cp.async of B, float4 stores) needs K % 4 == 0,
N % 4 == 0 and 16-byte aligned A, B, C; anything else runs the same pipeline with element-wise guarded scalar
loads and stores (_u).

Floor (as every rung; H100 SXM: dense fp32 FFMA peak ~67 TFLOP/s): 4096^3 2.05 ms, 8192^3 16.4 ms, 16384 x 7168 x
2048 and 4096 x 14336 x 4096 7.18 ms, the decode shapes 0.224 ms. cuBLAS's SGEMM itself reaches about 70-75 %
of that peak on an H100 (45-52 TFLOP/s measured in the ladder's runs).

Prediction: 8 x 16 thread tiles cut shared-memory reads per FMA by a quarter against rung 7, which ran at 0.886x
cuBLAS; if shared memory is what limits rung 7, ~0.93-1.0x.
Measured: see the README's ladder table (filled in from the sweep and `gauntlet eval` on an H100).
"""
import numpy as np
import torch

BACKEND = "cupy"
DTYPES = ("float32",)   # true fp32 (the judge sets matmul precision "highest"); no TF32, no 16-bit

# BM x BN x BK block tile; WARPS_M x WARPS_N warps; SUB_M x SUB_N sub-blocks of 4 x 4 per lane; MIN_BLOCKS for
# __launch_bounds__ (resident blocks per SM the register budget is cut for).
CONFIGS = {
    "128x128x16_w2x4_s2x2": dict(BM=128, BN=128, BK=16, WARPS_M=2, WARPS_N=4, SUB_M=2, SUB_N=2, MIN_BLOCKS=2),
    "128x128x16_w2x2_s2x4": dict(BM=128, BN=128, BK=16, WARPS_M=2, WARPS_N=2, SUB_M=2, SUB_N=4, MIN_BLOCKS=2),
    "128x128x8_w2x2_s2x4": dict(BM=128, BN=128, BK=8, WARPS_M=2, WARPS_N=2, SUB_M=2, SUB_N=4, MIN_BLOCKS=2),
    "128x256x8_w2x4_s2x4": dict(BM=128, BN=256, BK=8, WARPS_M=2, WARPS_N=4, SUB_M=2, SUB_N=4, MIN_BLOCKS=1),
    "256x128x8_w4x2_s2x4": dict(BM=256, BN=128, BK=8, WARPS_M=4, WARPS_N=2, SUB_M=2, SUB_N=4, MIN_BLOCKS=1),
    "64x256x16_w1x4_s2x4": dict(BM=64, BN=256, BK=16, WARPS_M=1, WARPS_N=4, SUB_M=2, SUB_N=4, MIN_BLOCKS=2),
    "128x64x16_w2x2_s2x2": dict(BM=128, BN=64, BK=16, WARPS_M=2, WARPS_N=2, SUB_M=2, SUB_N=2, MIN_BLOCKS=3),
    "128x128x16_w2x4_s2x2_1b": dict(BM=128, BN=128, BK=16, WARPS_M=2, WARPS_N=4, SUB_M=2, SUB_N=2, MIN_BLOCKS=1),
}
CONFIG = "128x128x16_w2x2_s2x4"

_TEMPLATE = r"""
#define BM {BM}
#define BN {BN}
#define BK {BK}
#define WARPS_M {WARPS_M}
#define WARPS_N {WARPS_N}
#define SUB_M {SUB_M}
#define SUB_N {SUB_N}
#define MIN_BLOCKS {MIN_BLOCKS}
#define NTHREADS (32 * WARPS_M * WARPS_N)
#define WM (32 * SUB_M)                  // a warp's rows: 8 lanes x 4 rows x SUB_M
#define WN (16 * SUB_N)                  // a warp's columns: 4 lanes x 4 columns x SUB_N
#define TM (4 * SUB_M)
#define TN (4 * SUB_N)
#define LDA (BM + 4)                     // padded A^T row (float4-aligned)
#define A_PER (BM * BK / 4 / NTHREADS)   // float4 loads of A per thread per K step
#define B_PER (BK * BN / 4 / NTHREADS)
#define GROUP_M 8
static_assert(BM == WARPS_M * WM && BN == WARPS_N * WN, "warp grid must cover the block tile");
static_assert(A_PER >= 1 && A_PER * NTHREADS * 4 == BM * BK, "A tile must split evenly into float4 loads");
static_assert(B_PER >= 1 && B_PER * NTHREADS * 4 == BK * BN, "B tile must split evenly into float4 loads");

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {{
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(n) : "memory");
}}
__device__ __forceinline__ void cp_async_wait_all() {{ asm volatile("cp.async.wait_all;\n" ::: "memory"); }}

template <bool ALIGNED>
__device__ __forceinline__ void tuned_gemm(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, int M, int N, int K, int kchunk, int atomic) {{
    __shared__ __align__(16) float As[2][BK][LDA];   // A^T tiles: As[stage][k][m]
    __shared__ __align__(16) float Bs[2][BK][BN];    // B tiles:   Bs[stage][k][n]
    const int tid = threadIdx.x;

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

    const int warp = tid >> 5, lane = tid & 31;
    const int arow = (warp / WARPS_N) * WM + (lane >> 2) * 4;
    const int bcol = (warp % WARPS_N) * WN + (lane & 3) * 4;

    float ra[A_PER][4];
    auto load_a = [&](int k0) {{
#pragma unroll
        for (int p = 0; p < A_PER; ++p) {{
            const int c = tid + p * NTHREADS;
            const int gr = m0 + c / (BK / 4), gk = k0 + (c % (BK / 4)) * 4;
            if (ALIGNED) {{
                if (gr < M && gk < kend) {{
                    const float4 t = *reinterpret_cast<const float4*>(A + (long long)gr * K + gk);
                    ra[p][0] = t.x; ra[p][1] = t.y; ra[p][2] = t.z; ra[p][3] = t.w;
                }} else {{ ra[p][0] = ra[p][1] = ra[p][2] = ra[p][3] = 0.0f; }}
            }} else {{
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    ra[p][e] = (gr < M && gk + e < kend) ? A[(long long)gr * K + gk + e] : 0.0f;
            }}
        }}
    }};
    auto store_a = [&](int s) {{
#pragma unroll
        for (int p = 0; p < A_PER; ++p) {{
            const int c = tid + p * NTHREADS;
            const int r = c / (BK / 4), kc = (c % (BK / 4)) * 4;
#pragma unroll
            for (int e = 0; e < 4; ++e) As[s][kc + e][r] = ra[p][e];
        }}
    }};
    auto load_b = [&](int s, int k0) {{
#pragma unroll
        for (int p = 0; p < B_PER; ++p) {{
            const int c = tid + p * NTHREADS;
            const int kr = c / (BN / 4), nc = (c % (BN / 4)) * 4;
            const int gk = k0 + kr, gn = n0 + nc;
            float* dst = &Bs[s][kr][nc];
            if (ALIGNED) {{
                const bool v = gk < kend && gn < N;
                cp_async16(dst, v ? (const void*)(B + (long long)gk * N + gn) : (const void*)B, v);
            }} else {{
#pragma unroll
                for (int e = 0; e < 4; ++e) dst[e] = (gk < kend && gn + e < N) ? B[(long long)gk * N + gn + e] : 0.0f;
            }}
        }}
    }};

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    const int num_k = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
    if (num_k > 0) {{
        load_a(kbeg);
        load_b(0, kbeg);
        store_a(0);
        if (ALIGNED) cp_async_wait_all();
    }}
    __syncthreads();

    for (int t = 0; t < num_k; ++t) {{
        const int cur = t & 1;
        const bool more = t + 1 < num_k;
        if (more) {{
            load_a(kbeg + (t + 1) * BK);
            load_b(cur ^ 1, kbeg + (t + 1) * BK);
        }}
#pragma unroll
        for (int d = 0; d < BK; ++d) {{
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < SUB_M; ++i) {{
                const float4 v = *reinterpret_cast<const float4*>(&As[cur][d][arow + i * 32]);
                a[i * 4 + 0] = v.x; a[i * 4 + 1] = v.y; a[i * 4 + 2] = v.z; a[i * 4 + 3] = v.w;
            }}
#pragma unroll
            for (int j = 0; j < SUB_N; ++j) {{
                const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][d][bcol + j * 16]);
                b[j * 4 + 0] = v.x; b[j * 4 + 1] = v.y; b[j * 4 + 2] = v.z; b[j * 4 + 3] = v.w;
            }}
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }}
        if (more) {{
            store_a(cur ^ 1);
            if (ALIGNED) cp_async_wait_all();
        }}
        __syncthreads();
    }}

#pragma unroll
    for (int i = 0; i < TM; ++i) {{
        const int gr = m0 + arow + (i >> 2) * 32 + (i & 3);
        if (gr >= M) continue;
        float* crow = C + (long long)gr * N;
#pragma unroll
        for (int h = 0; h < SUB_N; ++h) {{
            const int gc = n0 + bcol + h * 16;
            const float* v = &acc[i][h * 4];
            if (ALIGNED && !atomic && gc + 4 <= N) {{
                *reinterpret_cast<float4*>(crow + gc) = make_float4(v[0], v[1], v[2], v[3]);
            }} else {{
#pragma unroll
                for (int e = 0; e < 4; ++e) {{
                    if (gc + e < N) {{
                        if (atomic) atomicAdd(crow + gc + e, v[e]);
                        else crow[gc + e] = v[e];
                    }}
                }}
            }}
        }}
    }}
}}

extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
ladder8_tuned_a(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K, int kchunk, int atomic) {{
    tuned_gemm<true>(A, B, C, M, N, K, kchunk, atomic);
}}
extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
ladder8_tuned_u(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K, int kchunk, int atomic) {{
    tuned_gemm<false>(A, B, C, M, N, K, kchunk, atomic);
}}
"""
_NAMES = ("ladder8_tuned_a", "ladder8_tuned_u")


def source(cfg: dict) -> str:
    """The kernels' CUDA source for one configuration (CONFIGS)."""
    return _TEMPLATE.format(**cfg)


def threads(cfg: dict) -> int:
    return 32 * cfg["WARPS_M"] * cfg["WARPS_N"]


# (device index, config name) -> compiled kernels (compiled once per process, on the first call, never inside a
# timed call)
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


def _kernels(dev, name):
    ks = _KERNELS.get((dev, name))
    if ks is None:
        import cupy

        with cupy.cuda.Device(dev):
            # No --use_fast_math: true IEEE fp32 fmaf.
            mod = cupy.RawModule(code=source(CONFIGS[name]), options=("-std=c++17",))
            ks = tuple(mod.get_function(n) for n in _NAMES)
        _KERNELS[(dev, name)] = ks
    return ks


_SMS = {}


def _split_k(dev, tiles, K, bk, per_sm):
    """K slices for grids too small to fill the GPU (rung 7's rule): when the tiles are fewer than the SMs, K is
    cut into slices of a multiple of BK (at least 512 long, at most 32 of them) so the grid comes near `per_sm`
    resident blocks per SM; each slice adds its partial sums into a zeroed C with atomicAdd. Returns (slices,
    slice length)."""
    sms = _SMS.get(dev)
    if sms is None:
        sms = _SMS[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    if tiles >= sms:
        return 1, K
    split = max(1, min(per_sm * sms // tiles, K // 512, 32))
    chunk = -(-K // split)
    chunk = -(-chunk // bk) * bk
    return -(-K // chunk), chunk


def matmul(a, b, name=CONFIG):
    """C = a @ b with the configuration `name` (the sweep below calls it with each)."""
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], (a.shape, b.shape)
    assert a.dtype == torch.float32 and b.dtype == torch.float32 and a.is_cuda and a.device == b.device
    a, b = a.contiguous(), b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    assert max(M, N, K) < 2**31, (M, N, K)
    if M == 0 or N == 0 or K == 0:
        return torch.zeros((M, N), dtype=torch.float32, device=a.device)
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    cfg = CONFIGS[name]
    k_aligned, k_any = _kernels(dev, name)
    tiles = ((M + cfg["BM"] - 1) // cfg["BM"]) * ((N + cfg["BN"] - 1) // cfg["BN"])
    split, chunk = _split_k(dev, tiles, K, cfg["BK"], per_sm=cfg["MIN_BLOCKS"])
    c = (torch.zeros if split > 1 else torch.empty)((M, N), dtype=torch.float32, device=a.device)
    aligned = K % 4 == 0 and N % 4 == 0 and (a.data_ptr() | b.data_ptr() | c.data_ptr()) % 16 == 0
    assert tiles < 2**31 and split < 65536, (M, N, K)
    import cupy

    stream = _stream(torch.cuda.current_stream(a.device).cuda_stream)
    args = (np.uint64(a.data_ptr()), np.uint64(b.data_ptr()), np.uint64(c.data_ptr()),
            np.int32(M), np.int32(N), np.int32(K), np.int32(chunk), np.int32(int(split > 1)))
    with cupy.cuda.Device(dev), stream:
        (k_aligned if aligned else k_any)((tiles, split, 1), (threads(cfg), 1, 1), args)
    return c


def solve(a, b):
    return matmul(a, b)
