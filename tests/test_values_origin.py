"""What the values say beyond the tolerance, and the in-process fingerprints that must not be fooled by look-alikes:
- gauntlet.child.integrity: a harness string rebound to a `str` subclass that claims equality is a change; a hook
  object that claims to equal None is a hook;
- gauntlet.child.launches: only the ranges the harness opened under the call's nonce are its launches;
- gauntlet.judge.values.origin: an output that is torch's own bit for bit, where every other order differs, is the
  library's; honest orders, short sums (torch IS the plainest order there) and exact cases are never called so;
- gauntlet.judge.values.net: the float32 net case admits every honest order and rejects bf16x3, on every seed.
CPU only, a few seconds."""
from __future__ import annotations

import sys

import pytest
import torch

from gauntlet import discover
from gauntlet.child import guard, integrity, launches
from gauntlet.inputs import fma_chain_matmul, make_inputs, matmul_precision
from gauntlet.judge.values import net, origin
from gauntlet.judge.values.oracle import expected_for

GEMM = discover.get_problem("gemm")
F32 = GEMM.dtype("float32")


class Anything(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


def test_a_look_alike_string_is_a_change_and_plain_values_compare_by_value():
    mark = "gauntlet::launch::"
    assert not integrity.same(integrity.fingerprint(Anything(mark)), integrity.fingerprint(mark))
    assert not integrity.same(integrity.fingerprint((1, [Anything("x")])), integrity.fingerprint((1, ["x"])))
    assert integrity.same(integrity.fingerprint({"a": [1.5, float("nan")], "b": {3, 1}}),
                          integrity.fingerprint({"a": [1.5, float("nan")], "b": {1, 3}}))
    assert not integrity.same(integrity.fingerprint(True), integrity.fingerprint(1))       # bool is not int
    assert not integrity.same(Anything("x"), Anything("x"))       # not fingerprints: never compared by their own ==


def test_a_hook_that_claims_to_equal_none_is_still_a_hook():
    class Sly:
        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

        def __call__(self, *args):
            return None

    watch = guard.TamperWatch(extra_modules=())
    sys.setprofile(Sly())
    try:
        assert any("setprofile" in c for c in watch.changed())
    finally:
        sys.setprofile(None)
    assert watch.changed() == []


def _ranges(*names_and_spans):
    return [(a, b, 1, name) for name, a, b in names_and_spans]


def test_only_the_ranges_the_harness_opened_under_the_calls_nonce_are_its_launches():
    launches.begin("c0ffee")
    first, second = launches.opened("_gemm_kernel"), launches.opened("_gemm_kernel [BLOCK_M=64]")
    nonce, ledger = launches.end()
    assert (nonce, launches.end()[0]) == ("c0ffee", launches.NO_CALL)
    own, forged = launches.sort(_ranges((first, 0, 10), (second, 20, 30)), nonce, ledger)
    assert own == ["_gemm_kernel", "_gemm_kernel [BLOCK_M=64]"] and forged == []
    for extra in [("gauntlet::launch::_gemm_kernel", 40, 50),                   # the old name, no nonce
                  ("gauntlet::launch::c0ffee/7::_gemm_kernel", 40, 50),         # a number the harness never used
                  ("gauntlet::launch::deadbeef/0::_gemm_kernel", 40, 50)]:      # another call's nonce
        own, forged = launches.sort(_ranges((first, 0, 10), extra), nonce, ledger)
        assert own == ["_gemm_kernel"] and forged == [extra[0]], extra
    # a copy of the harness's own name: neither counts; a genuine range inside a forged one: neither counts
    assert launches.sort(_ranges((first, 0, 10), (first, 40, 50)), nonce, ledger)[0] == []
    own, forged = launches.sort(_ranges(("gauntlet::launch::x", 0, 100), (first, 10, 20)), nonce, ledger)
    assert own == [] and len(forged) == 2
    launches.begin("not a nonce!")                 # a malformed nonce names no call: nothing is the harness's
    name = launches.opened("k")
    assert launches.sort(_ranges((name, 0, 1)), *launches.end())[0] == []


def _case(shape, seed=3):
    for s in range(seed, seed + 50):
        inputs = make_inputs(GEMM, shape, F32, s, "cpu")
        if inputs.mode != "exact":
            return inputs, expected_for(GEMM, inputs, F32)
    raise AssertionError("no random case")


def _blocked(a, b, block=32):
    """A tiled kernel's order: fp32 partial products of `block` k's, added into the accumulator in turn."""
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k in range(0, a.shape[1], block):
        acc = acc + a[:, k:k + block] @ b[k:k + block]
    return acc


def test_torchs_own_result_is_the_librarys_and_honest_orders_are_not():
    shape = {"M": 64, "N": 96, "K": 1024}
    inputs, expected = _case(shape)
    control = lambda: fma_chain_matmul(*inputs)          # noqa: E731
    with matmul_precision(F32):
        library = inputs[0] @ inputs[1]
    found = origin.library_reasons(library, expected, False, control)
    assert [r.code for r in found] == ["forbidden_op"] and "bit-identical" in found[0].detail
    for honest in (_blocked(*inputs), fma_chain_matmul(*inputs), (inputs[0].double() @ inputs[1].double()).float(),
                   inputs[0].flip(1) @ inputs[1].flip(0)):
        assert origin.library_reasons(honest, expected, False, control) == []
    assert origin.library_reasons(library, expected, True, control) == []           # an exact case: never
    assert origin.library_reasons(library, expected, False, None) == []             # no control: never


@pytest.mark.parametrize("K", [9, 64, 128])
def test_a_short_sum_is_never_called_the_librarys_where_torch_is_the_plainest_order(K):
    """On the CPU, torch's sgemm up to K = 128 or so is one FMA chain per output: a naive kernel matches it bit for
    bit, honestly, so the control must stop the rule there."""
    inputs, expected = _case({"M": 64, "N": 64, "K": K})
    plain = fma_chain_matmul(*inputs)
    assert origin.library_reasons(plain, expected, False, lambda: fma_chain_matmul(*inputs)) == []


def _split3(a, b):
    def split(x):
        hi = x.bfloat16().float()
        return hi, (x - hi).bfloat16().float()
    (ah, al), (bh, bl) = split(a), split(b)
    return ah @ bh + (ah @ bl + al @ bh)


def test_the_net_case_admits_every_honest_order_and_rejects_bf16x3_on_every_seed():
    """Measured at gemm's CPU net case over 9 random calls (module docstring of gauntlet.judge.values.net): honest
    orders at most 5.5 u of the scale, bf16x3 at least 36 u. Here 6 seeds, every one."""
    shape = GEMM.net_case["cpu"]
    honest = {"torch": lambda a, b: a @ b, "tiled": _blocked, "fma_chain": fma_chain_matmul,
              "reversed": lambda a, b: a.flip(1) @ b.flip(0), "fp64": lambda a, b: (a.double() @ b.double()).float()}
    for seed in range(6):
        inputs, expected = _case(shape, seed * 101)
        assert net.applies(GEMM, "cpu", dict(shape), F32, False)
        with matmul_precision(F32):
            for name, fn in honest.items():
                assert net.reasons(fn(*inputs), expected) == [], (name, seed)
            found = net.reasons(_split3(*inputs), expected)
        assert [r.code for r in found] == ["mismatch"] and "net case" in found[0].detail, seed
    assert not net.applies(GEMM, "cpu", {"M": 64, "N": 96, "K": 1023}, F32, False)
    assert not net.applies(GEMM, "cpu", dict(shape), F32, True)
    assert not net.applies(GEMM, "cpu", dict(shape), GEMM.dtype("tf32"), False)
