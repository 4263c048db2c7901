"""The leaderboard explains itself: what the speedup is against and how it and its interval are made, what a rank, a
colour, a verdict and a reason code mean, and which machine and commit produced it; on a CPU page, that nothing was
timed. Built from real records (tests/data: H100 runs, and a CPU run of gemm/torch_matmul)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from gauntlet.reports import baselines, explain
from gauntlet.reports.leaderboard import build
from tests.test_reports import INJECTION, _Page

DATA = Path(__file__).parent / "data"
GPU_FILES = sorted(DATA.glob("h100_triton_tiled_*.json"))
CPU_FILE = DATA / "cpu_gemm_torch_matmul.json"


class _Terms(_Page):
    """The explanation's terms (<dt>) and the text of each (<dd>, its lists included), in the page's order."""

    def __init__(self, text: str):
        self.terms, self.where = {}, None
        super().__init__(text)

    def handle_starttag(self, tag, attrs):
        super().handle_starttag(tag, attrs)
        self.where = tag if tag in ("dt", "dd") else self.where

    def handle_data(self, data):
        super().handle_data(data)
        if "dl" not in self.stack:
            return
        if self.where == "dt":
            self.terms[data.strip()] = ""
        elif self.where == "dd" and self.terms:
            last = list(self.terms)[-1]
            self.terms[last] = " ".join((self.terms[last] + data).split()) + (" " if data[-1:].isspace() else "")


def _terms(html: str) -> dict:
    return {term: text.strip() for term, text in _Terms(html).terms.items()}


def _build(tmp_path, paths):
    result = build(paths, tmp_path / "out")
    return result["html"].read_text(encoding="utf-8"), result["markdown"].read_text(encoding="utf-8")


def test_the_figures_it_explains_are_the_harness_figures():
    from gauntlet.judge.timing import scoring
    from gauntlet.reasons import CODES
    assert explain.CODES == CODES
    assert (explain.BOOTSTRAP_N, explain.SYSTEMATIC_FLOOR, explain.HOST_BOUND_FLOOR) == (
        scoring.BOOTSTRAP_N, scoring.SYSTEMATIC_FLOOR, scoring.HOST_BOUND_FLOOR)


def test_a_gpu_page_says_what_its_speedups_are_against_and_how_they_are_made(tmp_path):
    html, md = _build(tmp_path, GPU_FILES + [DATA / "h100_eval_many.jsonl"])
    terms = _terms(html)
    assert list(terms) == ["Produced by", "Speedup", "Baselines", "Interval", "Rank", "Verdicts", "Reason codes"]
    assert "NVIDIA H100 80GB HBM3" in terms["Produced by"] and "commit 0b86eb7a4e98-dirty" in terms["Produced by"]
    assert "same run on the same card" in terms["Speedup"] and "geometric mean" in terms["Speedup"]
    assert "gemm: cublas, cuBLAS (or the CPU BLAS) through torch.matmul" in terms["Baselines"]
    assert "95% bootstrap interval" in terms["Interval"] and "0.3% on each side" in terms["Interval"]
    assert "3%" not in terms["Interval"].replace("0.3%", "")     # no host-bound baseline in these records
    assert "mismatch (fail): values outside the tolerance" in terms["Reason codes"]
    assert "crash (error)" in terms["Reason codes"] and "timeout" not in terms["Reason codes"]
    for term in terms:
        assert f"- **{term}**: " in md, term
    assert "cuBLAS (or the CPU BLAS) through torch.matmul" in md and "0.3% on each side" in md


def test_a_baseline_timed_through_its_host_launches_gets_the_wider_floor_said(tmp_path):
    doc = json.loads(GPU_FILES[0].read_text())
    doc["timings"][0]["baselines"]["cublas"]["waits_for_gpu"] = True
    (tmp_path / "host.json").write_text(json.dumps(doc))
    terms = _terms(_build(tmp_path, [tmp_path / "host.json"])[0])
    assert "or by 3% where a baseline whose calls wait for the GPU was timed through its host launches" in \
        terms["Interval"]
    # Timed by its kernels (gauntlet.judge.timing.bench): its interval has the ordinary floor, and nothing is said.
    doc["timings"][0]["baselines"]["cublas"]["timed_by"] = "kernels"
    (tmp_path / "host.json").write_text(json.dumps(doc))
    terms = _terms(_build(tmp_path, [tmp_path / "host.json"])[0])
    assert "or by 3%" not in terms["Interval"]


def test_a_cpu_page_says_nothing_was_timed_and_what_its_grid_shows(tmp_path):
    html, md = _build(tmp_path, [CPU_FILE])
    terms = _terms(html)
    assert list(terms) == ["Produced by", "Not timed", "Colours", "Verdicts"]
    assert terms["Produced by"].startswith("CPU") and "commit b8f01c018538-dirty" in terms["Produced by"]
    assert "nothing is timed" in terms["Not timed"] and "Each grid cell is the solution's verdict" in terms["Not timed"]
    assert "- **Not timed**: " in md and "**Speedup**" not in md and "**Interval**" not in md


def test_what_a_result_wrote_stays_escaped_in_the_explanation(tmp_path):
    doc = json.loads((DATA / "h100_triton_tiled_1.json").read_text())
    hostile = copy.deepcopy(doc)
    hostile.update(problem=INJECTION, verdict="fail", reasons=[{"code": INJECTION, "detail": "x"}])
    hostile["environment"]["git_commit"] = INJECTION
    (tmp_path / "hostile.json").write_text(json.dumps(hostile))
    html, md = _build(tmp_path, [tmp_path / "hostile.json"])
    assert "<script" not in html.lower() and "<script" not in md.lower()
    terms = _terms(html)
    assert f"{INJECTION} (?): not a code this report knows" in terms["Reason codes"]


def test_a_baseline_is_described_only_from_the_shipped_files():
    assert baselines.describe_baseline("attention_fwd", "sdpa").startswith("torch.nn.functional.scaled_dot_product")
    assert baselines.describe_baseline("gemm", "no_such_label") == ""
    assert baselines.describe_baseline("no_such_problem", "cublas") == ""
    assert baselines.describe_baseline("../solutions", "cublas") == ""
    assert len(baselines.describe_baseline("fp8_gemm_rowwise", "scaled_mm")) <= baselines.DESCRIPTION_LIMIT + 2
