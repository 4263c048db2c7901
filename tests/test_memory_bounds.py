"""Fuzz bounds sized by the device in hand (gauntlet.judge.values.memory): the judge and the candidate together must fit
in the GPU's free memory, on an 80 GB H100 as on a 141 GB H200. Pure functions of a problem and a budget: CPU tests."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from gauntlet import discover
from gauntlet.discover import UsageError
from gauntlet.judge.values import fuzz, memory

H100 = memory.MemoryBudget("cuda", 78 * 2**30)      # what is free on an 80 GB H100 with a CUDA context up
H200 = memory.MemoryBudget("cuda", 139 * 2**30)


def _bmm_worst():
    """bmm's largest output inside its cuda work budget (B*M*N*K <= 4e9 with K = 1): the case that took the judge
    out of memory on an H100."""
    p = discover.get_problem("bmm")
    bounds = p.fuzz["cuda"]
    return p, bounds, {"B": bounds.budget // (4500 * 4500), "M": 4500, "N": 4500, "K": 1}


@pytest.mark.parametrize("budget", [H100, H200], ids=["h100", "h200"])
def test_the_case_that_ran_the_judge_out_of_memory_is_brought_down_to_fit(budget):
    p, bounds, worst = _bmm_worst()
    assert worst["B"] * worst["M"] * worst["N"] * worst["K"] <= bounds.budget   # inside the work budget
    fits = memory.fits_predicate(p, 2, budget)
    assert not fits(worst)
    fitted = fuzz.fit(worst, bounds, fits)
    assert fitted is not None and fits(fitted)
    assert memory.case_bytes(p, fitted, 2, p.calls_per_case) <= budget.usable
    for d, (lo, hi) in bounds.dims.items():
        assert lo <= fitted[d] <= worst[d]


def test_a_bigger_gpu_keeps_bigger_cases():
    p, bounds, worst = _bmm_worst()
    small = fuzz.fit(worst, bounds, memory.fits_predicate(p, 2, H100))
    big = fuzz.fit(worst, bounds, memory.fits_predicate(p, 2, H200))
    assert memory.case_bytes(p, big, 2, 3) > memory.case_bytes(p, small, 2, 3)


def test_drawn_shapes_and_edge_cases_all_fit():
    p = discover.get_problem("bmm")
    bounds = p.fuzz["cuda"]
    fits = memory.fits_predicate(p, 4, H100)
    for case in fuzz.edge_cases(bounds, None, fits):
        assert fits(case)
    seen = []

    @settings(max_examples=200, database=None, deadline=None)
    @given(fuzz.shapes(bounds, None, fits))
    def draw(shape):
        assert fits(shape)
        seen.append(shape)
    draw()
    assert len(seen) == 200


def test_gemm_domain_is_untouched_on_an_h100():
    """Where the work budget already keeps memory small, the device changes nothing."""
    p = discover.get_problem("gemm")
    fits = memory.fits_predicate(p, 4, H100)
    for case in fuzz.edge_cases(p.fuzz["cuda"]):
        assert fits(case)
    assert fits({"M": 4500, "N": 4500, "K": 9000})


def test_replaying_a_case_the_device_cannot_hold_is_a_usage_error_with_its_size(monkeypatch):
    p, _, worst = _bmm_worst()
    monkeypatch.setattr(memory, "device_budget", lambda device: H100)
    case = ",".join(f"{k}={v}" for k, v in worst.items()) + ",seed=1"
    with pytest.raises(UsageError, match=r"needs about [\d.]+ GiB of cuda memory .* 78\.0 GiB are free"):
        fuzz.check_case(case, p, "cuda", 2)
    fuzz.check_case("B=2,M=8,N=8,K=8,seed=1", p, "cuda", 2)     # a small one is fine


def test_no_budget_means_no_bound():
    p, bounds, worst = _bmm_worst()
    assert memory.fits_predicate(p, 2, None) is None
    assert fuzz.fit(worst, bounds, None) == worst
    assert memory.too_big(p, worst, 2, None) == ""


def test_judges_sharing_a_gpu_each_take_their_share(monkeypatch):
    p, bounds, worst = _bmm_worst()
    monkeypatch.setenv("GAUNTLET_JUDGES_PER_GPU", "4")
    assert memory.judges_per_gpu() == 4
    quarter = memory.MemoryBudget("cuda", H100.free_bytes, 4)
    assert quarter.usable * 4 == pytest.approx(H100.usable, abs=4)
    fitted = fuzz.fit(worst, bounds, memory.fits_predicate(p, 2, quarter))
    assert memory.case_bytes(p, fitted, 2, 3) <= quarter.usable
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("GAUNTLET_JUDGES_PER_GPU", bad)
        with pytest.raises(UsageError, match="GAUNTLET_JUDGES_PER_GPU"):
            memory.judges_per_gpu()
