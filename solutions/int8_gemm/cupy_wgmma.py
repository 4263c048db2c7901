"""int8 GEMM C = A @ W^T (int8 x int8 -> int32, exact) on Hopper's own path: TMA loads, an mbarrier pipeline,
warp-specialised warpgroups and integer wgmma, in CUDA C++ with inline PTX compiled at run time by NVRTC through
CuPy for sm_90a. The int8 sibling of gemm/cupy_wgmma.py (issue 19: a CUDA-through-CuPy int8 kernel against
torch._int_mm, cuBLASLt's IMMA kernels).

Why the layout suits it: A is (M, K) and W is (N, K), both row-major, so both operands are K-major, which is what
8-bit wgmma needs (its transpose bits exist only for 16-bit types; problems/int8_gemm/problem.yaml). Each operand
tile is then a plain TMA box of rows of 128 K bytes, in the 128-byte swizzle wgmma reads, for A and for W alike.

Design (one CTA per 128 x BN output tile, BK = 128 bytes of K, BN = 256 for big grids, 128 for small ones):
* 3 warpgroups (384 threads). Warpgroup 0 is the producer: one thread issues the stage's TMA copies (A: one
  128 x 128 box; W: BN/64 boxes of 64 rows x 128 bytes) and announces the stage's bytes on its "full" mbarrier.
  Warpgroups 1 and 2 are consumers: each owns 64 rows of the tile and runs 4 wgmma m64nBNk32 .s32.s8.s8 per stage,
  keeping one stage's MMAs in flight (wait_group 1) before handing the stage before it back through its "empty"
  mbarrier. Accumulators stay in registers (BN/2 int32 per thread).
* 48 KB of operands per stage at BN = 256 (4 stages), 32 KB at BN = 128 (6 stages): 192 KB of shared memory.
* Tiles grouped by 8 tile rows so CTAs resident together share panels of A and W in L2.
* Decode-sized grids (fewer tiles than SMs): BN = 128 and, where that still leaves SMs idle, K split across CTAs
  (int32 partials, then a small sum kernel of this file). Integer sums are exact in any order, so splitting K
  changes nothing in the result.
* Edges: TMA zero-fills outside the matrix; the epilogue stores only inside C. TMA needs 16-byte aligned pointers
  and row strides (K a multiple of 16 bytes); an even N lets the epilogue store int32 pairs. Any other shape or
  alignment takes a plain tiled kernel of this file (int32 accumulate, exact), never on a benchmark shape.
* Tensor maps are encoded on the host (cuTensorMapEncodeTiled, through ctypes on the driver) and passed by value
  as __grid_constant__ kernel parameters.

Floor (H100 SXM: dense int8 peak ~1979 TOPS; ~3.0 TB/s HBM measured), MMA at peak / bytes at bandwidth:
4096x6144x4096 0.104 ms; 4096x28672x4096 0.486 ms (its int32 output alone is 470 MB: 0.157 ms of stores);
4096x4096x14336 0.243 ms; 8192x10240x8192 0.694 ms; 8192x8192x28672 1.94 ms; decode 128x28672x4096 and
128x8192x28672: W alone is 117 MB and 235 MB -> 39 and 78 us (memory-bound).
Prediction: the machinery of gemm/cupy_wgmma (0.92x cuBLAS bf16) at twice the MMA rate per byte of operand moved,
so nearer the limits of L2 and of the producer; torch._int_mm reached 939 TOPS (47% of peak) in this layout on an
H100, so parity is within reach at the large shapes, and the decode shapes are bandwidth-bound for both.

Measured (NVIDIA H100 80GB HBM3, 2026-11-26):
- exact on 17 shapes against a float64 product (the TMA path at BN 256 and 128, split-K, the fallback, M = 1 to
  4500, K up to 16384, rows of -128), and on the fuzzed domain: `gauntlet eval int8_gemm` passed with seeds 52
  and 53;
- `gauntlet eval int8_gemm solutions/int8_gemm/cupy_wgmma.py --seed 52` (the defaults), against torch._int_mm in
  the same judgement, the nine benchmark shapes in problem.yaml's order: 1.440 / 1.482 / 1.537 / 1.557 / 1.615 /
  1.253 / 1.326 / 1.102 / 1.295, geomean **1.39x** (up to 1656 TOPS, 84% of the datasheet's dense peak);
  int8_gemm/triton_int8 in the same session read 1.165 to 1.436, geomean 1.22x;
- CUDA events, 20 calls back to back: 1.41 to 1.75x on the large shapes, 1.10 and 1.69x at decode.
The first eval failed `below_roofline`: the int8 ceiling was cuBLASLt's own rate (961 TOPS), so 1520 TOPS read as
faster than the hardware. The ceiling is now the better of that and twice cuBLAS's bf16 rate, the tensor cores'
int8 rate (harness/judge/timing/peaks.py).
Not tried: TMA multicast across a cluster (each CTA loads its own A and W panels from L2), a persistent grid with
the epilogue overlapped with the next tile's loads, a TMA store of C.
"""
import collections
import ctypes
import threading

import numpy as np
import torch

BACKEND = "cupy"
DTYPES = ("int8",)

_BM, _BK, _THREADS = 128, 128, 384
_STAGES = {256: 4, 128: 6}
_SMS = {}
_MODULES = {}
_MAPS = collections.OrderedDict()      # (pointers, shape) -> (A's map, W's map), host bytes
_MAPS_KEPT = 64
_LOCK = threading.Lock()


def _wgmma(bn: int) -> str:
    """The wgmma wrapper for m64n{bn}k32 .s32.s8.s8: bn/2 int32 accumulator registers per thread, listed one by
    one (the instruction takes them as a vector operand). Integer wgmma has no scale or transpose immediates."""
    n = bn // 2
    regs = ", ".join(f"%{i}" for i in range(n))
    cons = ", ".join(f'"+r"(d[{i}])' for i in range(n))
    return (f'__device__ __forceinline__ void wgmma_n{bn}(int* d, u64 da, u64 db, int scale) {{\n'
            f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{n + 2}, 0;\\n"\n'
            f'    "wgmma.mma_async.sync.aligned.m64n{bn}k32.s32.s8.s8 {{{regs}}}, %{n}, %{n + 1}, p;\\n}}\\n"\n'
            f'    : {cons}\n    : "l"(da), "l"(db), "r"(scale));\n}}\n')


_COMMON = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char s8;

// A CUtensorMap, passed by value as a __grid_constant__ kernel parameter: TMA reads it from parameter space.
struct __align__(64) TensorMap { u64 words[16]; };
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
__device__ __forceinline__ void tma_2d(u32 dst, u64 map, u32 bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];" :: "r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
// A shared-memory matrix descriptor, 128-byte swizzle: start, leading and stride byte offsets in 16-byte units.
__device__ __forceinline__ u64 sdesc(u32 addr, u32 lbo, u32 sbo) {
    return (u64)((addr >> 4) & 0x3FFF) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)((sbo >> 4) & 0x3FFF) << 32)
           | (1ull << 62);
}
"""

_MAIN = r"""
#define BN @BN@
#define STAGES @STAGES@
#define A_BYTES (128 * 128)
#define B_BYTES (BN * 128)
#define STAGE_BYTES (A_BYTES + B_BYTES)

extern "C" __global__ void __launch_bounds__(384, 1)
wgmma_i8_gemm_n@BN@(const __grid_constant__ TensorMap tmap_a, const __grid_constant__ TensorMap tmap_w,
                    int* __restrict__ C, int* __restrict__ ws, int M, int N, int K, int tiles_m, int tiles_n,
                    int kt_per_split) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) u64 full[STAGES], empty[STAGES];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const u64 map_a = (u64)&tmap_a, map_w = (u64)&tmap_w;
    const int tid = threadIdx.x, wg = tid / 128;

    const int pid = blockIdx.x, group = 8 * tiles_n, first_m = (pid / group) * 8;
    const int rows = min(tiles_m - first_m, 8);
    const int tm = first_m + (pid % group) % rows, tn = (pid % group) / rows;
    const int m0 = tm * 128, n0 = tn * BN;
    const int KT = (K + 127) / 128;
    const int kt0 = blockIdx.y * kt_per_split, kt1 = min(KT, kt0 + kt_per_split), nk = kt1 - kt0;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) { mbar_init(smem_u32(&full[s]), 1); mbar_init(smem_u32(&empty[s]), 2); }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        if (tid == 0) {
            asm volatile("prefetch.tensormap [%0];" :: "l"(map_a) : "memory");
            asm volatile("prefetch.tensormap [%0];" :: "l"(map_w) : "memory");
            for (int i = 0; i < nk; ++i) {
                const int s = i % STAGES, kt = kt0 + i;
                if (i >= STAGES) mbar_wait(smem_u32(&empty[s]), ((i / STAGES) - 1) & 1);
                const u32 bar = smem_u32(&full[s]);
                mbar_expect_tx(bar, STAGE_BYTES);
                const u32 sa = smem_u32(smem + s * STAGE_BYTES), sb = sa + A_BYTES;
                tma_2d(sa, map_a, bar, kt * 128, m0);
                #pragma unroll
                for (int j = 0; j < BN / 64; ++j) tma_2d(sb + j * (64 * 128), map_w, bar, kt * 128, n0 + 64 * j);
            }
        }
        return;
    }

    const int cw = wg - 1;                     // this consumer's 64 rows of the tile
    int d[BN / 2];
    #pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0;
    for (int i = 0; i < nk; ++i) {
        const int s = i % STAGES;
        mbar_wait(smem_u32(&full[s]), (i / STAGES) & 1);
        const u32 base = smem_u32(smem + s * STAGE_BYTES);
        const u32 sa = base + cw * (64 * 128), sb = base + A_BYTES;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        #pragma unroll
        for (int k = 0; k < 4; ++k)            // 4 x k32: 32 bytes further along each 128-byte row
            wgmma_n@BN@(d, sdesc(sa + 32 * k, 16, 1024), sdesc(sb + 32 * k, 16, 1024), 1);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        if (i > 0 && (tid & 127) == 0) mbar_arrive(smem_u32(&empty[(i - 1) % STAGES]));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");

    const int t = tid & 127, row = m0 + cw * 64 + (t / 32) * 16 + (t & 31) / 4, colb = n0 + 2 * (t & 3);
    int* out = ws == nullptr ? C : ws + (size_t)blockIdx.y * M * N;
    #pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = colb + 8 * j;
        if (col < N) {
            if (row < M) *(int2*)(out + (size_t)row * N + col) = make_int2(d[4 * j], d[4 * j + 1]);
            if (row + 8 < M) *(int2*)(out + (size_t)(row + 8) * N + col) = make_int2(d[4 * j + 2], d[4 * j + 3]);
        }
    }
}
#undef BN
#undef STAGES
#undef A_BYTES
#undef B_BYTES
#undef STAGE_BYTES
"""

_EXTRA = r"""
// Sums the K-split int32 partials into C, two outputs per thread (N is even on this path).
extern "C" __global__ void wgmma_i8_splitk_sum(const int* __restrict__ ws, int* __restrict__ C, long long pairs,
                                               int splits) {
    const long long mn = 2 * pairs;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < pairs;
         p += (long long)gridDim.x * blockDim.x) {
        int2 acc = *(const int2*)(ws + 2 * p);
        for (int s = 1; s < splits; ++s) {
            const int2 v = *(const int2*)(ws + s * mn + 2 * p);
            acc.x += v.x; acc.y += v.y;
        }
        *(int2*)(C + 2 * p) = acc;
    }
}

// Any shape, any alignment: 32 x 32 tiles of C, 256 threads, 4 outputs each, int32 accumulate (exact).
extern "C" __global__ void __launch_bounds__(256)
wgmma_i8_gemm_fallback(const s8* __restrict__ A, const s8* __restrict__ W, int* __restrict__ C, int M, int N,
                       int K) {
    __shared__ int As[32][33], Ws[32][33];
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const int row0 = blockIdx.y * 32, col0 = blockIdx.x * 32;
    int acc[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < K; k0 += 32) {
        for (int i = ty; i < 32; i += 8) {
            const int r = row0 + i, c = col0 + i, k = k0 + tx;
            As[i][tx] = (r < M && k < K) ? (int)A[(size_t)r * K + k] : 0;
            Ws[i][tx] = (c < N && k < K) ? (int)W[(size_t)c * K + k] : 0;
        }
        __syncthreads();
        #pragma unroll 8
        for (int kk = 0; kk < 32; ++kk) {
            const int w = Ws[tx][kk];
            #pragma unroll
            for (int q = 0; q < 4; ++q) acc[q] += As[ty + 8 * q][kk] * w;
        }
        __syncthreads();
    }
    #pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int r = row0 + ty + 8 * q, c = col0 + tx;
        if (r < M && c < N) C[(size_t)r * N + c] = acc[q];
    }
}
"""


def source() -> str:
    """The whole CUDA source (also what a reader can compile alone to inspect the PTX)."""
    parts = [_COMMON, _wgmma(256), _wgmma(128)]
    for bn in (256, 128):
        parts.append(_MAIN.replace("@BN@", str(bn)).replace("@STAGES@", str(_STAGES[bn])))
    parts.append(_EXTRA)
    return "".join(parts)


def _smem_bytes(bn: int) -> int:
    return _STAGES[bn] * (_BM * _BK + bn * _BK) + 1024      # + slack to align the stages to 1024 bytes


def _module(dev: int) -> dict:
    with _LOCK:
        got = _MODULES.get(dev)
        if got is None:
            import cupy
            with cupy.cuda.Device(dev):
                # CuPy adds -arch=sm_90 for an H100; wgmma needs the arch-specific sm_90a, and NVRTC takes the "a"
                # target when both are given.
                mod = cupy.RawModule(code=source(), options=("-std=c++17", "-arch=sm_90a"))
                got = {bn: mod.get_function(f"wgmma_i8_gemm_n{bn}") for bn in (256, 128)}
                for bn, fn in got.items():
                    fn.max_dynamic_shared_size_bytes = _smem_bytes(bn)
                got["sum"] = mod.get_function("wgmma_i8_splitk_sum")
                got["fallback"] = mod.get_function("wgmma_i8_gemm_fallback")
            _MODULES[dev] = got
    return got


_CUDA = None


def _encode_fn():
    global _CUDA
    if _CUDA is None:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuTensorMapEncodeTiled
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                       ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        _CUDA = fn
    return _CUDA


def _tensor_map(ptr: int, inner: int, outer: int, box_outer: int) -> bytes:
    """A 2-D tensor map (CUtensorMap, 128 bytes) over a row-major [outer, inner] matrix of bytes, boxes of
    box_outer rows x 128 bytes, 128-byte swizzle, zeros outside the matrix."""
    raw = ctypes.create_string_buffer(128 + 64)
    at = (ctypes.addressof(raw) + 63) & ~63                  # the driver wants it 64-byte aligned
    dims = (ctypes.c_uint64 * 2)(inner, outer)
    strides = (ctypes.c_uint64 * 1)(inner)
    box = (ctypes.c_uint32 * 2)(128, box_outer)
    elem = (ctypes.c_uint32 * 2)(1, 1)
    # CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0 (TMA moves bytes; the sign is wgmma's .s8); interleave none; swizzle
    # 128B = 3; L2 promotion 256B = 3; OOB fill none (zeros) = 0.
    err = _encode_fn()(ctypes.c_void_p(at), 0, 2, ctypes.c_void_p(ptr), dims, strides, box, elem, 0, 3, 3, 0)
    if err != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {err} (inner={inner}, outer={outer})")
    return ctypes.string_at(at, 128)


def _maps(a, w, M: int, N: int, K: int) -> tuple:
    """A's and W's tensor maps as one-element numpy arrays of 128 raw bytes: CuPy passes a one-element array by
    value, so each lands in the kernel's parameter space. Kept per (pointers, shape): encoding is a host call."""
    key = (a.data_ptr(), w.data_ptr(), M, N, K)
    got = _MAPS.get(key)
    if got is not None:
        _MAPS.move_to_end(key)
        return got
    got = tuple(np.frombuffer(blob, dtype=np.dtype((np.void, 128))) for blob in
                (_tensor_map(a.data_ptr(), K, M, 128), _tensor_map(w.data_ptr(), K, N, 64)))
    _MAPS[key] = got
    while len(_MAPS) > _MAPS_KEPT:
        _MAPS.popitem(last=False)
    return got


class _StreamHandle:
    """A raw cudaStream_t speaking the CUDA stream protocol, for cupy.cuda.Stream.from_external."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def _sms(dev: int) -> int:
    if dev not in _SMS:
        _SMS[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    return _SMS[dev]


def plan(M: int, N: int, K: int, sms: int) -> tuple:
    """(BN, K splits, k tiles per split) for the TMA path: BN = 256 where that gives at least two waves of tiles,
    else 128; K split where the tiles alone leave more than half the SMs idle."""
    tiles_m = -(-M // _BM)
    kt = -(-K // _BK)
    bn = 256 if tiles_m * -(-N // 256) >= 2 * sms else 128
    tiles = tiles_m * -(-N // bn)
    splits = 1
    if tiles * 2 <= sms:
        splits = max(1, min(sms // tiles, kt // 8))
    per = -(-kt // splits)
    splits = -(-kt // per)
    return bn, splits, per


def solve(a, w):
    assert a.dim() == 2 and w.dim() == 2 and a.shape[1] == w.shape[1], (tuple(a.shape), tuple(w.shape))
    assert a.dtype == torch.int8 and w.dtype == torch.int8 and a.is_cuda and w.is_cuda, (a.dtype, w.dtype)
    assert a.device == w.device, (a.device, w.device)
    a, w = a.contiguous(), w.contiguous()
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), dtype=torch.int32, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    assert max(M, N, K) < 2**31
    import cupy
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    kernels = _module(dev)
    stream = cupy.cuda.Stream.from_external(_StreamHandle(torch.cuda.current_stream(a.device).cuda_stream))
    aligned = K % 16 == 0 and N % 2 == 0 and (a.data_ptr() | w.data_ptr()) % 16 == 0 and c.data_ptr() % 8 == 0
    with cupy.cuda.Device(dev), stream:
        if not aligned:
            kernels["fallback"](((N + 31) // 32, (M + 31) // 32), (256,),
                                (np.uint64(a.data_ptr()), np.uint64(w.data_ptr()), np.uint64(c.data_ptr()),
                                 np.int32(M), np.int32(N), np.int32(K)))
            return c
        bn, splits, per = plan(M, N, K, _sms(dev))
        maps = _maps(a, w, M, N, K)
        tiles_m, tiles_n = -(-M // _BM), -(-N // bn)
        ws = torch.empty((splits, M, N), dtype=torch.int32, device=a.device) if splits > 1 else None
        kernels[bn]((tiles_m * tiles_n, splits), (_THREADS,),
                    (*maps, np.uint64(c.data_ptr()),
                     np.uint64(ws.data_ptr() if ws is not None else 0), np.int32(M), np.int32(N), np.int32(K),
                     np.int32(tiles_m), np.int32(tiles_n), np.int32(per)),
                    shared_mem=_smem_bytes(bn))
        if ws is not None:
            pairs = M * N // 2
            kernels["sum"]((min(-(-pairs // 256), 4 * _sms(dev)),), (256,),
                           (np.uint64(ws.data_ptr()), np.uint64(c.data_ptr()), np.int64(pairs), np.int32(splits)))
    return c
