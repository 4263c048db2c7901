"""CUDA SGEMM ladder, rung 4 of 7: 1-D block tiling (several outputs per thread). C = A @ B in true fp32 (FFMA, no
TF32), CUDA C++ compiled at run time by NVRTC through CuPy, launched on torch's current stream.

What this rung adds over rung 3 (shared-memory tiling): each thread computes a column of TM = 8 outputs instead
of one. A block of 512 threads owns a 64 x 64 tile of C and walks K in steps of BK = 8, staging a 64 x 8 tile of A
and an 8 x 64 tile of B in shared memory (one element of each per thread, coalesced along K for A and along N
for B). In the inner loop a thread loads one B value into a register and reuses it for 8 fmaf with 8 A values;
the A values are the same for the 64 threads of a tile row, so within a warp they are broadcasts. Shared-memory
loads per fmaf drop from 2 to 9/8, and each global element is reused 64 times per block.

Edges: zero-filled loads outside A and B (rows >= M, columns >= N, k >= K), guarded stores; every thread reaches
every __syncthreads.

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

Prediction: ~25-35% of cuBLAS on the large shapes, ~2.5-3x rung 3 (the walk-through this ladder follows saw 2.8x
on an A6000). The M = 128 decode shapes give 2 tile rows, 2 x 224 and 2 x 64 = 448 and 128 blocks: the second
fills 128 of 132 SMs with one 16-warp block each.
Geomean prediction: ~0.28x cuBLAS.
Measured (NVIDIA H100 80GB HBM3, 2026-11-25; speedup vs cuBLAS's true-fp32 SGEMM timed in the same
judgement, 4096^3 / 8192^3, `gauntlet eval ... --dtype float32 --examples 4 --max-shapes 2`; pass on
the fuzzed domain, odd and aligned shapes): 0.327x / 0.324x (16.8 / 16.8 TFLOP/s), geomean 0.326x, 1.88x rung 3.
"""
import numpy as np
import torch

BACKEND = "cupy"
DTYPES = ("float32",)   # true fp32 (the judge sets matmul precision "highest"); no TF32, no 16-bit

_NAMES = ("ladder4_blocktile_1d",)
_BM, _BN, _THREADS = 64, 64, 512   # must match _SRC

_SRC = r"""
#define BM 64
#define BN 64
#define BK 8
#define TM 8
#define NTHREADS 512   // BM * BN / TM

// 64 x 64 tile of C per block; thread (trow, tcol) owns rows trow*8 .. trow*8+7 of column tcol.
extern "C" __global__ void __launch_bounds__(NTHREADS)
ladder4_blocktile_1d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K) {
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int tcol = tid % BN, trow = tid / BN;        // trow in 0..7
    const int a_r = tid / BK, a_k = tid % BK;          // this thread's element of the A tile (64 x 8)
    const int b_k = tid / BN, b_n = tid % BN;          // and of the B tile (8 x 64)
    const int ga = m0 + a_r, gb = n0 + b_n;

    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        As[a_r][a_k] = (ga < M && k0 + a_k < K) ? A[(long long)ga * K + k0 + a_k] : 0.0f;
        Bs[b_k][b_n] = (k0 + b_k < K && gb < N) ? B[(long long)(k0 + b_k) * N + gb] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int d = 0; d < BK; ++d) {
            const float bv = Bs[d][tcol];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] = fmaf(As[trow * TM + i][d], bv, acc[i]);
        }
        __syncthreads();
    }
    const int gc = n0 + tcol;
    if (gc < N) {
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int gr = m0 + trow * TM + i;
            if (gr < M) C[(long long)gr * N + gc] = acc[i];
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


def solve(a, b):
    a, b, M, N, K, dev = _prepare(a, b)
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    (kern,) = _kernels(dev)
    grid = ((N + _BN - 1) // _BN, (M + _BM - 1) // _BM, 1)
    assert grid[1] < 65536, M
    _launch(kern, dev, grid, _THREADS, a, b, c, M, N, K)
    return c
