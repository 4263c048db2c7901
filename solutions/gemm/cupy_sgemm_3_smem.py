"""CUDA SGEMM ladder, rung 3 of 7: shared-memory tiling. C = A @ B in true fp32 (FFMA, no TF32), CUDA C++
compiled at run time by NVRTC through CuPy, launched on torch's current stream.

What this rung adds over rung 2 (coalesced): a block of 32 x 32 threads stages a 32 x 32 tile of A and a 32 x 32
tile of B in shared memory per step of 32 along K (each thread loads one element of each, coalesced), then every
thread computes its dot-product piece from shared memory. Each global element loaded is reused 32 times from
shared memory instead of being fetched from L1/L2 32 times. Reads are conflict-free: As[ty][k] is one address
per warp (a broadcast), Bs[k][tx] 32 consecutive words. Still one output per thread, so the inner loop does two
shared-memory loads per fmaf; that, not DRAM, is the limit.

Edges: loads outside A or B (rows >= M, columns >= N, k >= K: odd sizes, primes, K = 1) write zeros into the
tile, which add nothing to the dot products; stores are guarded. Every thread reaches every __syncthreads.

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

Prediction: ~8-12% of cuBLAS (shared-memory load bound, 1024-thread blocks: two blocks per SM); ~1.5x rung 2.
Geomean prediction: ~0.10x cuBLAS.
Measured (NVIDIA H100 80GB HBM3, 2026-11-25; speedup vs cuBLAS's true-fp32 SGEMM timed in the same
judgement, 4096^3 / 8192^3, `gauntlet eval ... --dtype float32 --examples 4 --max-shapes 2`; pass on
the fuzzed domain, odd and aligned shapes): 0.173x / 0.174x (8.9 / 9.0 TFLOP/s), geomean 0.173x, 1.58x rung 2.
"""
import numpy as np
import torch

BACKEND = "cupy"
DTYPES = ("float32",)   # true fp32 (the judge sets matmul precision "highest"); no TF32, no 16-bit

_NAMES = ("ladder3_smem",)

_SRC = r"""
#define TS 32

// 32 x 32 tile of C per block of 32 x 32 threads; A and B staged through shared memory 32 columns of K at a time.
extern "C" __global__ void ladder3_smem(const float* __restrict__ A, const float* __restrict__ B,
                                        float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TS][TS];
    __shared__ float Bs[TS][TS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TS + ty;
    const int col = blockIdx.x * TS + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        // Zero outside the matrices: the padding adds nothing to the sums.
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(long long)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(long long)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TS; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();   // the tile is overwritten by the next step
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
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
    # columns on grid x, rows on grid y (M / 32 <= 65535 for every M this problem allows).
    grid = ((N + 31) // 32, (M + 31) // 32, 1)
    assert grid[1] < 65536, M
    _launch(kern, dev, grid, (32, 32, 1), a, b, c, M, N, K)
    return c
