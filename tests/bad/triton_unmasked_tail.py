"""Known-bad: a Triton GEMM with no masks at all (written and tested only on multiples of the tile size): on a
ragged shape its loads read past the ends of A and B and its stores write past the end of C. On the GPU that is
garbage in the tail or an illegal-address fault. Triton's CPU interpreter emulates loads and stores by
dereferencing the raw addresses: on the first, tiny case the child died of SIGSEGV (a load past a small tensor into
unmapped memory) in one run and of SIGABRT (glibc noticing the heap the stray stores corrupted) in another; where
the stray accesses land in mapped memory and nothing notices, the tail is garbage. Either way the run must go on.
Expected: crash (a mismatch is possible where nothing faults)."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "crash"
ALSO_ACCEPTED = ("mismatch", "nan_mismatch")
DEVICE = "cpu"
DTYPES = ("float32",)


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def solve(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    _gemm[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, BM=32, BN=32, BK=32)
    return c
