"""Known-good, autotuned: a split-K GEMM under @triton.autotune, the common idiom in third-party Triton code (three
configs, split 2, 1 and 4 ways along K, keyed on M, N, K). Each program adds its partial product into the fp32
output with tl.atomic_add, so the kernel declares reset_to_zero on the output: the autotuner runs it before the
call that counts (many times on a GPU, once under the harness's CPU interpreter, which runs the first config left
after pruning) and the output must be zeroed in between. The output starts as torch.zeros, so a later call with a
known key (no tuning, so no reset) is right too. float32 with an ieee dot (no TF32). Judged on the CPU, this shows
that an autotuned kernel runs under the interpreter (it crashed with "0 active drivers" before) and that
reset_to_zero is honoured. Expected: pass."""
import torch
import triton
import triton.language as tl

BACKEND = "triton"
EXPECTED = "pass"
DEVICE = "cpu"
DTYPES = ("float32",)


@triton.autotune(
    configs=[triton.Config({"BM": 64, "BN": 64, "BK": 128, "SPLIT_K": 2}, num_warps=4),
             triton.Config({"BM": 64, "BN": 64, "BK": 64, "SPLIT_K": 1}, num_warps=4),
             triton.Config({"BM": 128, "BN": 64, "BK": 64, "SPLIT_K": 4}, num_warps=8, num_stages=4)],
    key=["M", "N", "K"], reset_to_zero=["c_ptr"])
@triton.jit
def _splitk_gemm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(tl.program_id(2) * BK, K, BK * SPLIT_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.atomic_add(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def solve(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    if M == 0 or N == 0 or K == 0:
        return c
    grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]), meta["SPLIT_K"])  # noqa: E731
    _splitk_gemm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                       c.stride(1))
    return c
