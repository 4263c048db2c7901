"""Known-good, unusual: keeps its own cache of "compiled" kernels keyed by dtype and shape class (aligned or not,
small or large M), the legitimate form of caching: what is cached is code and configuration, never data or
answers. Each entry holds a Triton kernel specialised through constexpr tiles; every call still computes its own
product from its own inputs. Expected: pass."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "pass"
DEVICE = "cpu"
DTYPES = ("bfloat16",)


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class _Compiled:
    """One specialisation: the tile config for a (dtype, shape class), bound to the jitted kernel."""

    def __init__(self, dtype, small_m, aligned):
        self.bm = 16 if small_m else 64
        self.bn = 64 if aligned else 32
        self.bk = 32
        self.dtype = dtype

    def __call__(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, dtype=a.dtype, device=a.device)
        grid = (triton.cdiv(M, self.bm), triton.cdiv(N, self.bn))
        _gemm[grid](a, b, c, M, N, K, BM=self.bm, BN=self.bn, BK=self.bk)
        return c


_kernels = {}


def solve(a, b):
    a, b = a.contiguous(), b.contiguous()
    key = (a.dtype, a.shape[0] <= 16, a.shape[1] % 16 == 0 and b.shape[1] % 16 == 0)
    if key not in _kernels:
        _kernels[key] = _Compiled(*key)
    return _kernels[key](a, b)
