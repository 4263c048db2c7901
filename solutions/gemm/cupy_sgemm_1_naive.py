"""CUDA SGEMM ladder, rung 1 of 7: the naive kernel. C = A @ B in true fp32 (FFMA, no TF32), CUDA C++ compiled at
run time by NVRTC through CuPy, launched on torch's current stream.

What this rung is: one thread per element of C, each walking the whole K dimension with fmaf, reading A and B
straight from global memory. The thread-to-element map is the textbook mistake the next rung fixes: threadIdx.x
walks the ROWS of C, so the 32 threads of a warp read 32 different rows of A (K floats apart: 32 memory
transactions per load instruction) and write 32 different rows of C; their B reads all hit the same address (a
broadcast). Only the L1 cache, which keeps each A row's 32-byte sector for the next 7 values of k, keeps it from
being slower still. Block 32 x 32 threads = a 32 x 32 tile of C.

Edges: every thread checks row < M and col < N; nothing else depends on the shape (K = 1 is one fmaf).

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

Prediction: ~1-2% of cuBLAS on the large shapes (memory-transaction bound: every fmaf needs one uncoalesced load
instruction), a little better on the M = 128 decode shapes, where A is small and stays in L1/L2.
Geomean prediction: ~0.015x cuBLAS.
Measured (NVIDIA H100 80GB HBM3, 2026-11-25; speedup vs cuBLAS's true-fp32 SGEMM timed in the same
judgement, 4096^3 / 8192^3, `gauntlet eval ... --dtype float32 --examples 4 --max-shapes 2`; pass on
the fuzzed domain, odd and aligned shapes): 0.0097x at 4096^3 (0.5 TFLOP/s), the
only shape timed: its first judgement stopped there, and the second (after the fix below) used --max-shapes 1.
Its first judgement was called tampering: the 270 ms call ended 24 us past the events' window
on the profiler's clock, the two clocks' rates differing (gauntlet.judge.timing.window now allows that).
"""
import numpy as np
import torch

BACKEND = "cupy"
DTYPES = ("float32",)   # true fp32 (the judge sets matmul precision "highest"); no TF32, no 16-bit

_NAMES = ("ladder1_naive",)

_SRC = r"""
// One thread per C element; threadIdx.x walks rows (uncoalesced on purpose: rung 2 swaps the map).
extern "C" __global__ void ladder1_naive(const float* __restrict__ A, const float* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K) {
    const int row = blockIdx.x * 32 + threadIdx.x;
    const int col = blockIdx.y * 32 + threadIdx.y;
    if (row < M && col < N) {
        const float* a = A + (long long)row * K;
        const float* b = B + col;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc = fmaf(a[k], b[(long long)k * N], acc);
        C[(long long)row * N + col] = acc;
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
    # rows on grid x (no 65535 limit), columns on grid y (N / 32 <= 65535 for every N this problem allows).
    grid = ((M + 31) // 32, (N + 31) // 32, 1)
    assert grid[1] < 65536, N
    _launch(kern, dev, grid, (32, 32, 1), a, b, c, M, N, K)
    return c
