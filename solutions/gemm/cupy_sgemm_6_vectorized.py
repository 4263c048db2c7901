"""CUDA SGEMM ladder, rung 6 of 7: vectorised (float4) memory access and conflict-free shared memory. C = A @ B in
true fp32 (FFMA, no TF32), CUDA C++ compiled at run time by NVRTC through CuPy, launched on torch's current stream.

What this rung adds over rung 5 (2-D block tiling; same 128 x 128 x 8 tile, 256 threads, 8 x 8 outputs each):
* Global loads are 16-byte float4s: one of A (4 consecutive k of one row) and one of B (4 consecutive n) per
  thread per step, instead of 4 + 4 scalar loads.
* A is stored TRANSPOSED in shared memory (As[k][m], rows padded to 132 floats so the 4 scalar stores of the
  transpose hit 32 different banks), so a thread's 8 A values for one k are contiguous: 2 float4 reads, like its
  8 B values. Shared-memory reads per step: 4 LDS.128 instead of 16 LDS.32.
* Thread (ty, tx) of a 16 x 16 grid owns rows {ty*4 .. +3, 64 + ty*4 .. +3} and columns {tx*4 .. +3,
  64 + tx*4 .. +3}: split into two 4-wide halves, every float4 read of a warp is either a broadcast (A) or 16
  consecutive float4s (B), free of the bank conflicts rung 5's contiguous 8-wide blocks had.
* The epilogue writes float4s.
Split-K for the decode shapes as in rung 5.

Alignment: the float4 path (kernel _a) needs K % 4 == 0, N % 4 == 0 and 16-byte aligned A, B, C; then every
float4 is wholly inside or wholly outside the matrix (slices start on multiples of 8) and out-of-range ones are
zeros. Anything else (odd K or N, primes, offset pointers) runs the same kernel with element-wise guarded scalar
loads and stores (_u): slower, right on the whole domain.

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

Prediction: ~65-75% of cuBLAS on the large shapes, ~1.3x rung 5 (the walk-through saw 1.15x on an A6000, where
rung 5's conflicts cost less); the same gain on the decode shapes.
Geomean prediction: ~0.65x cuBLAS.
Measured (NVIDIA H100 80GB HBM3, 2026-11-25; speedup vs cuBLAS's true-fp32 SGEMM timed in the same
judgement, 4096^3 / 8192^3, `gauntlet eval ... --dtype float32 --examples 4 --max-shapes 2`; pass on
the fuzzed domain, odd and aligned shapes): 0.726x / 0.722x (37.4 / 37.3 TFLOP/s), geomean 0.724x, 1.23x rung 5.
"""
import numpy as np
import torch

BACKEND = "cupy"
DTYPES = ("float32",)   # true fp32 (the judge sets matmul precision "highest"); no TF32, no 16-bit

_NAMES = ("ladder6_vectorized_a", "ladder6_vectorized_u")
_BM, _BN, _BK, _THREADS = 128, 128, 8, 256   # must match _SRC

_SRC = r"""
#define BM 128
#define BN 128
#define BK 8
#define NTHREADS 256
#define LDA (BM + 4)   // padded A^T row: float4-aligned, and the transposing stores spread over all 32 banks

template <bool ALIGNED>
__device__ __forceinline__ void vec_gemm(const float* __restrict__ A, const float* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K, int kchunk, int atomic) {
    __shared__ __align__(16) float As[BK][LDA];   // A^T tile: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];    // B tile:   Bs[k][n]
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    const int tx = tid & 15, ty = tid >> 4;
    const int a_r = tid >> 1, a_k = (tid & 1) * 4;     // A tile 128 x 8 = 256 float4: one per thread
    const int b_k = tid >> 5, b_n = (tid & 31) * 4;    // B tile 8 x 128 = 256 float4: one per thread

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    for (int k0 = kbeg; k0 < kend; k0 += BK) {
        float ra[4], rb[4];
        const int gr = m0 + a_r, gk = k0 + a_k;
        if (ALIGNED) {   // K % 4 == 0 and kend % 4 == 0: the float4 is wholly in or out
            if (gr < M && gk < kend) {
                const float4 t = *reinterpret_cast<const float4*>(A + (long long)gr * K + gk);
                ra[0] = t.x; ra[1] = t.y; ra[2] = t.z; ra[3] = t.w;
            } else { ra[0] = ra[1] = ra[2] = ra[3] = 0.0f; }
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) ra[e] = (gr < M && gk + e < kend) ? A[(long long)gr * K + gk + e] : 0.0f;
        }
        const int bk = k0 + b_k, bn = n0 + b_n;
        if (ALIGNED) {   // N % 4 == 0
            if (bk < kend && bn < N) {
                const float4 t = *reinterpret_cast<const float4*>(B + (long long)bk * N + bn);
                rb[0] = t.x; rb[1] = t.y; rb[2] = t.z; rb[3] = t.w;
            } else { rb[0] = rb[1] = rb[2] = rb[3] = 0.0f; }
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) rb[e] = (bk < kend && bn + e < N) ? B[(long long)bk * N + bn + e] : 0.0f;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) As[a_k + e][a_r] = ra[e];
        *reinterpret_cast<float4*>(&Bs[b_k][b_n]) = make_float4(rb[0], rb[1], rb[2], rb[3]);
        __syncthreads();
#pragma unroll
        for (int d = 0; d < BK; ++d) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[d][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[d][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[d][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[d][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
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
ladder6_vectorized_a(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K, int kchunk, int atomic) {
    vec_gemm<true>(A, B, C, M, N, K, kchunk, atomic);
}
extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
ladder6_vectorized_u(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K, int kchunk, int atomic) {
    vec_gemm<false>(A, B, C, M, N, K, kchunk, atomic);
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
    tiles_m, tiles_n = (M + _BM - 1) // _BM, (N + _BN - 1) // _BN
    split, chunk = _split_k(dev, tiles_m * tiles_n, K, _BK, per_sm=2)
    # split > 1 adds into C, so C starts at zero; otherwise every element is written once.
    c = (torch.zeros if split > 1 else torch.empty)((M, N), dtype=torch.float32, device=a.device)
    aligned = K % 4 == 0 and N % 4 == 0 and (a.data_ptr() | b.data_ptr() | c.data_ptr()) % 16 == 0
    assert tiles_m < 65536, M
    _launch(k_aligned if aligned else k_any, dev, (tiles_n, tiles_m, split), _THREADS, a, b, c, M, N, K,
            chunk, int(split > 1))
    return c
