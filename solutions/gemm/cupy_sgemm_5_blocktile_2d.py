"""CUDA SGEMM ladder, rung 5 of 7: 2-D block tiling (an 8 x 8 register tile per thread). C = A @ B in true fp32
(FFMA, no TF32), CUDA C++ compiled at run time by NVRTC through CuPy, launched on torch's current stream.

What this rung adds over rung 4 (1-D block tiling): each thread computes an 8 x 8 block of C as an outer product.
A block of 256 threads owns a 128 x 128 tile and walks K in steps of BK = 8; per step a thread loads 8 A values
and 8 B values from shared memory into registers and does 64 fmaf with them: 1/4 shared-memory load per fmaf
(rung 4: 9/8), and each global element is reused 128 times per block. Loads to shared memory are still scalar
(4 of A and 4 of B per thread per step) and the reads are scalar too, with 2-way (A) and 4-way (B) bank
conflicts; rung 6 fixes both. __launch_bounds__(256, 2) holds a thread to 128 registers so two blocks share an
SM (ptxas 13.0 takes 129 without it, and then only one fits: 8 warps to hide every barrier and load).

Also new here, because a 128 x 128 tile starves the M = 128 decode shapes (32 and 112 tiles for 132 SMs): split-K
when the tiles are fewer than the SMs. K is cut into slices on gridDim.z, each block sums its slice and adds it
into a zeroed C with atomicAdd (true fp32 adds; the order varies from run to run). The large shapes are not split.

Edges: zero-filled loads outside A and B (rows >= M, columns >= N, k >= the slice's end), guarded stores; every
thread reaches every __syncthreads.

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

Prediction: ~50-60% of cuBLAS on the large shapes (~2x rung 4: the walk-through saw 1.9x on an A6000); the decode
shapes, split 8 and 2 ways, near 40-50% (the atomics and the zeroing are small: 128 x N outputs).
Geomean prediction: ~0.5x cuBLAS.
Measured (NVIDIA H100 80GB HBM3, 2026-11-25; speedup vs cuBLAS's true-fp32 SGEMM timed in the same
judgement, 4096^3 / 8192^3, `gauntlet eval ... --dtype float32 --examples 4 --max-shapes 2`; pass on
the fuzzed domain, odd and aligned shapes): 0.588x / 0.590x (30.3 / 30.7 TFLOP/s), geomean 0.589x, 1.81x rung 4.
"""
import numpy as np
import torch

BACKEND = "cupy"
DTYPES = ("float32",)   # true fp32 (the judge sets matmul precision "highest"); no TF32, no 16-bit

_NAMES = ("ladder5_blocktile_2d",)
_BM, _BN, _BK, _THREADS = 128, 128, 8, 256   # must match _SRC

_SRC = r"""
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define NTHREADS 256              // (BM / TM) * (BN / TN)
#define A_STRIDE (NTHREADS / BK)  // rows of the A tile loaded per pass: 32
#define B_STRIDE (NTHREADS / BN)  // rows of the B tile loaded per pass: 2

// 128 x 128 tile of C per block, K slice blockIdx.z; thread (trow, tcol) owns the 8 x 8 block at (trow*8, tcol*8).
extern "C" __global__ void __launch_bounds__(NTHREADS, 2)
ladder5_blocktile_2d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K, int kchunk, int atomic) {
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
    const int a_r = tid / BK, a_k = tid % BK;
    const int b_k = tid / BN, b_n = tid % BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float rm[TM], rn[TN];

    for (int k0 = kbeg; k0 < kend; k0 += BK) {
#pragma unroll
        for (int p = 0; p < BM; p += A_STRIDE) {
            const int gr = m0 + a_r + p, gk = k0 + a_k;
            As[a_r + p][a_k] = (gr < M && gk < kend) ? A[(long long)gr * K + gk] : 0.0f;
        }
#pragma unroll
        for (int p = 0; p < BK; p += B_STRIDE) {
            const int gk = k0 + b_k + p, gn = n0 + b_n;
            Bs[b_k + p][b_n] = (gk < kend && gn < N) ? B[(long long)gk * N + gn] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int d = 0; d < BK; ++d) {
#pragma unroll
            for (int i = 0; i < TM; ++i) rm[i] = As[trow * TM + i][d];
#pragma unroll
            for (int j = 0; j < TN; ++j) rn[j] = Bs[d][tcol * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(rm[i], rn[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gr = m0 + trow * TM + i;
        if (gr >= M) continue;
        float* crow = C + (long long)gr * N;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int gc = n0 + tcol * TN + j;
            if (gc < N) {
                if (atomic) atomicAdd(crow + gc, acc[i][j]);
                else crow[gc] = acc[i][j];
            }
        }
    }
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
    (kern,) = _kernels(dev)
    tiles_m, tiles_n = (M + _BM - 1) // _BM, (N + _BN - 1) // _BN
    split, chunk = _split_k(dev, tiles_m * tiles_n, K, _BK, per_sm=2)
    # split > 1 adds into C, so C starts at zero; otherwise every element is written once.
    c = (torch.zeros if split > 1 else torch.empty)((M, N), dtype=torch.float32, device=a.device)
    assert tiles_m < 65536, M
    _launch(kern, dev, (tiles_n, tiles_m, split), _THREADS, a, b, c, M, N, K, chunk, int(split > 1))
    return c
