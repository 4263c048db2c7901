"""The persistent TMA paths of bmm/triton_tiled, gemm_layouts/triton_tiled and gemm_bias_gelu/triton_fused on Triton's
CPU interpreter. The GPU takes them at every large benchmark shape, but the CPU fuzzer rarely draws a shape they
accept (bmm: a 64-row tile must divide M and a 16-wide K tile K; the others: more than 256 rows and 16-byte rows), so
here shapes are chosen that do, the path is checked to have been taken, and the output is held to float64 math. The
card is made small (one SM) as well as H100-sized, so that both the large tile with its split store and the halved
tiles run. A batch read from its neighbour's rows, a transposed view read as stored, a K tile dropped or a bias
column shifted moves outputs by whole multiples of their size; the budget is bf16's rounding plus fp32
accumulation. TF32 takes the paths too once its operands are K-major. The tests after the GELU one hold the fp32
operand copies to their rules (which operand, when, into which order: gemm_layouts, bmm, attn_scores' K), the
Triton transpose that makes them, and gemm_layouts' decode NT run as the transposed product."""
from __future__ import annotations

import pytest
import torch

from tests import needs
from tests.needs import interpreter_patches  # noqa: F401 (a fixture)

bmm = needs.load_for_interpreter("solutions/bmm/triton_tiled.py", "tma_bmm")
lay = needs.load_for_interpreter("solutions/gemm_layouts/triton_tiled.py", "tma_layouts")
gelu = needs.load_for_interpreter("solutions/gemm_bias_gelu/triton_fused.py", "tma_gelu")


def _taken(monkeypatch, mod, n_sm):
    """Spy on mod's TMA path and set the card's SM count; returns the list of its answers."""
    seen = []
    real = mod._persistent
    monkeypatch.setattr(mod, "_sm_count", lambda device: n_sm)
    monkeypatch.setattr(mod, "_persistent", lambda *a: seen.append(real(*a)) or seen[-1])
    return seen


def _check(out, want, scale, what):
    bound = 2 ** -8 * want.abs() + 2 ** -10 * scale.sqrt()
    worst = float(((out.double() - want).abs() - bound).max())
    assert worst <= 0, f"{what}: an output beyond its budget by {worst:.3g}"


def _rand(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch.bfloat16)


@needs.triton_cpu
@pytest.mark.parametrize("n_sm", [1, 132])
@pytest.mark.parametrize(("nb", "M", "N", "K"), [(3, 128, 264, 64), (2, 256, 136, 192), (2, 64, 40, 48),
                                             (2, 192, 136, 32)])
def test_bmm_persistent_path(interpreter_patches, monkeypatch, n_sm, nb, M, N, K):
    seen = _taken(monkeypatch, bmm, n_sm)
    a, b = _rand(nb, M, K, seed=M + K), _rand(nb, K, N, seed=N)
    out = bmm.solve(a, b)
    assert seen == [True], "the TMA path was not taken"
    want = a.double() @ b.double()
    _check(out, want, (a.double() ** 2) @ (b.double() ** 2), f"bmm {nb}x{M}x{N}x{K}, {n_sm} SMs")


@needs.triton_cpu
@pytest.mark.parametrize(("nb", "M", "N", "K", "k_major"), [(2, 256, 128, 64, False), (3, 256, 80, 96, False),
                                                         (2, 128, 272, 48, True)])
def test_bmm_tf32_persistent_path(interpreter_patches, monkeypatch, nb, M, N, K, k_major):
    """TF32 takes the TMA path with B K-major: copied there where reused (M >= COPY_MIN_REUSE), or given so."""
    seen = _taken(monkeypatch, bmm, 1)
    a, b = _rand(nb, M, K, seed=M + K).float(), _rand(nb, K, N, seed=N).float()
    if k_major:
        b = b.transpose(1, 2).contiguous().transpose(1, 2)
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")
    out = bmm.solve(a, b)
    assert seen == [True], "the TMA path was not taken"
    want = a.double() @ b.double()
    _check(out, want, (a.double() ** 2) @ (b.double() ** 2), f"tf32 bmm {nb}x{M}x{N}x{K}")


@needs.triton_cpu
@pytest.mark.parametrize("n_sm", [1, 132])
@pytest.mark.parametrize(("layout", "M", "N", "K"), [("NN", 300, 40, 144), ("NT", 264, 264, 160),
                                                     ("TN", 272, 48, 80)])
def test_layouts_persistent_path(interpreter_patches, monkeypatch, n_sm, layout, M, N, K):
    seen = _taken(monkeypatch, lay, n_sm)
    A, B = _rand(M, K, seed=M), _rand(K, N, seed=N + K)
    a = A if layout[0] == "N" else A.t().contiguous().t()      # TN: A is the .t() of a (K, M) matrix
    b = B if layout[1] == "N" else B.t().contiguous().t()      # NT: B is the .t() of an (N, K) matrix
    out = lay.solve(a, b)
    assert seen == [True], "the TMA path was not taken"
    want = A.double() @ B.double()
    _check(out, want, (A.double() ** 2) @ (B.double() ** 2), f"{layout} {M}x{N}x{K}, {n_sm} SMs")


@needs.triton_cpu
@pytest.mark.parametrize(("layout", "M", "N", "K"), [("NN", 264, 272, 96), ("NT", 300, 48, 64),
                                                     ("TN", 272, 264, 80)])
def test_layouts_tf32_persistent_path(interpreter_patches, monkeypatch, layout, M, N, K):
    """TF32 takes the TMA path once its operands are K-major (copied there by _operand_order where reused)."""
    seen = _taken(monkeypatch, lay, 1)
    A, B = _rand(M, K, seed=M).float(), _rand(K, N, seed=N + K).float()   # bf16 values: tf32 keeps them exactly
    a = A if layout[0] == "N" else A.t().contiguous().t()
    b = B if layout[1] == "N" else B.t().contiguous().t()
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")
    out = lay.solve(a, b)
    assert seen == [True], "the TMA path was not taken"
    want = A.double() @ B.double()
    _check(out, want, (A.double() ** 2) @ (B.double() ** 2), f"tf32 {layout} {M}x{N}x{K}")


@needs.triton_cpu
@pytest.mark.parametrize("n_sm", [1, 132])
@pytest.mark.parametrize(("M", "N", "K"), [(300, 136, 200), (264, 264, 64), (264, 136, 2112)])   # K > SHORT_K last
def test_gelu_persistent_path(interpreter_patches, monkeypatch, n_sm, M, N, K):
    seen = _taken(monkeypatch, gelu, n_sm)
    a, w, bias = _rand(M, K, seed=M), _rand(N, K, seed=N), _rand(N, seed=K)
    out = gelu.solve(a, w, bias)
    assert seen == [True], "the TMA path was not taken"
    want = torch.nn.functional.gelu(a.double() @ w.double().T + bias.double())
    _check(out, want, (a.double() ** 2) @ (w.double() ** 2).T, f"gelu {M}x{N}x{K}, {n_sm} SMs")


@needs.triton_cpu
@pytest.mark.parametrize(("layout", "precision", "M", "N", "copied"), [
    ("NT", "ieee", 256, 64, "b"), ("NT", "ieee", 255, 64, ""), ("NN", "ieee", 512, 64, ""),
    ("NN", "tf32", 256, 64, "b"), ("TN", "tf32", 256, 256, "ab"), ("TN", "tf32", 256, 255, "b"),
    ("NT", "tf32", 512, 512, ""), ("TN", "ieee", 512, 512, ""), ("NN", "ieee", 64, 256, "a"),
    ("NT", "ieee", 256, 256, "ab"), ("NN", "ieee", 64, 255, "")])
def test_fp32_operands_are_copied_only_into_the_order_their_math_reads_and_only_when_reused(
        interpreter_patches, layout, precision, M, N, copied):
    """True fp32 tiles read A M-major and B N-major, TF32 tensor cores both operands K-major; a copy pays off only
    where each of its elements is used by COPY_MIN_REUSE rows (for B) or columns (for A). The values never change."""
    K = 48
    A, B = torch.randn(M, K), torch.randn(K, N)
    a = A if layout[0] == "N" else A.t().contiguous().t()
    b = B if layout[1] == "N" else B.t().contiguous().t()
    a2, b2 = lay._operand_order(a, b, precision)          # copies by the solution's Triton transpose
    assert ("a" if a2.data_ptr() != a.data_ptr() else "") + ("b" if b2.data_ptr() != b.data_ptr() else "") == copied
    assert torch.equal(a2, A) and torch.equal(b2, B)
    if "b" in copied:
        assert b2.stride(1 if precision == "ieee" else 0) == 1
    if "a" in copied:
        assert a2.stride(0 if precision == "ieee" else 1) == 1


scores = needs.load_for_interpreter("solutions/attn_scores/triton_gqa.py", "copy_scores")


@needs.triton_cpu
@pytest.mark.parametrize(("G", "Sq", "copied"), [(4, 64, True), (3, 85, False)])
def test_scores_fp32_keys_copied_contiguous_only_when_reused(interpreter_patches, monkeypatch, G, Sq, copied):
    """True fp32 scores read K keys-contiguous once G*Sq rows reuse each key (COPY_MIN_REUSE); same values."""
    seen = []
    kernel = scores._scores_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **meta):
                seen.append(args[1].stride())
                return kernel[grid](*args, **meta)
            return launch
    monkeypatch.setattr(scores, "_scores_kernel", Spy())
    g = torch.Generator().manual_seed(G * Sq)
    q, k = torch.randn(1, 2 * G, Sq, 64, generator=g), torch.randn(1, 2, 40, 64, generator=g)
    out = scores.solve(q, k)
    assert (seen[0][2] == 1) == copied, seen
    want = (q.double().view(1, 2, G, Sq, 64) @ k.double()[:, :, None].transpose(-1, -2)).view(1, 2 * G, Sq, 40) / 8
    assert float((out.double() - want).abs().max()) <= 1e-5 * float(want.abs().max())


@needs.triton_cpu
@pytest.mark.parametrize(("nb", "R", "C"), [(1, 1, 70), (3, 65, 33), (2, 100, 1)])
@pytest.mark.parametrize("unit_axis", [0, 1])
def test_bmm_relayout_copies_every_matrix_into_the_asked_order(interpreter_patches, nb, R, C, unit_axis):
    """bmm's operand copy (a tiled Triton transpose): same values, the asked unit stride, from any strides."""
    src = torch.randn(nb, C, R).transpose(1, 2)[:, ::1, :]      # a batch of transposed views
    out = bmm._relayout(src, unit_axis)
    assert torch.equal(out, src) and out.stride(1 + unit_axis) == 1


@needs.triton_cpu
@pytest.mark.parametrize(("M", "N", "swapped"), [(100, 300, True), (1, 256, True), (256, 300, False),
                                                 (100, 255, False)])
def test_layouts_fp32_decode_nt_runs_as_the_transposed_product(interpreter_patches, monkeypatch, M, N, swapped):
    """True fp32 x @ W^T with few rows runs as C^T = W @ x^T (x^T copied, C written through its transposed view):
    the same values as float64 math allows, at every shape the rule takes or leaves."""
    seen = []
    kernel = lay._gemm_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **meta):
                seen.append(args[10:12])                      # the strides the kernel writes C with
                return kernel[grid](*args, **meta)
            return launch
    monkeypatch.setattr(lay, "_gemm_kernel", Spy())
    g = torch.Generator().manual_seed(M + N)
    x, w = torch.randn(M, 40, generator=g), torch.randn(N, 40, generator=g)
    out = lay.solve(x, w.t())
    assert (seen[0] == (1, N)) == swapped, seen
    want = x.double() @ w.double().t()
    assert out.shape == (M, N) and out.is_contiguous()
    assert float((out.double() - want).abs().max()) <= 1e-5 * float(want.abs().max())


@needs.triton_cpu
@pytest.mark.parametrize(("N", "copied"), [(256, True), (255, False)])
def test_bmm_fp32_reads_a_column_major_where_reused(interpreter_patches, monkeypatch, N, copied):
    """True fp32 bmm copies a row-major A column-major (its FMA tiles' fastest order) once N >= COPY_MIN_REUSE."""
    seen = []
    kernel = bmm._bmm_kernel

    class Spy:
        def __getitem__(self, grid):
            def launch(*args, **meta):
                seen.append(args[7:9])                        # A's row and column strides as the kernel reads A
                return kernel[grid](*args, **meta)
            return launch
    monkeypatch.setattr(bmm, "_bmm_kernel", Spy())
    g = torch.Generator().manual_seed(N)
    a, b = torch.randn(2, 40, 24, generator=g), torch.randn(2, 24, N, generator=g)
    out = bmm.solve(a, b)
    assert (seen[0] == (1, 40)) == copied, seen
    want = a.double() @ b.double()
    assert float((out.double() - want).abs().max()) <= 1e-5 * float(want.abs().max())
