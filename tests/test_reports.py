"""The leaderboard report: files written, ranking, failure reasons, escaping of hostile details, bad input."""
from __future__ import annotations

import ast
import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gauntlet.reports import leaderboard
from gauntlet.reports.leaderboard import build, markdown_table

INJECTION = "<script>alert(1)</script>"


def _timing(dtype, shape, speedup, tflops, base="cublas"):
    return {"dtype": dtype, "shape": shape, "source": "synthetic", "candidate_ms": 0.2, "candidate_wall_ms": 0.25,
            "mode": "graph", "reps": 50, "tflops": tflops, "gbps": 100.0, "peak_fraction": tflops / 800,
            "bw_fraction": 0.05, "spot_check": "pass",
            "baselines": {base: {"ms": 0.2 * speedup, "speedup": speedup, "ci95": [speedup - 0.02, speedup + 0.02],
                                 "tflops": 700.0}}}


def _record(problem, solution, verdict="pass", speedups=(), reasons=(), backend="triton", device="cuda",
            dtype="bfloat16", base="cublas"):
    shapes = [{"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 14336, "K": 4096}]
    timings = [_timing(dtype, s, x, 500.0 * x, base) for s, x in zip(shapes, speedups)]
    score = {}
    if timings:
        g = (speedups[0] * speedups[1]) ** 0.5 if len(speedups) == 2 else speedups[0]
        score = {dtype: {base: {"geomean_speedup": g, "fast_1.0": sum(x >= 1 for x in speedups) / len(speedups),
                                "fast_1.5": sum(x >= 1.5 for x in speedups) / len(speedups),
                                "shapes": len(speedups)}}}
    cases = {} if verdict == "unsupported" else {dtype: {"examples": 30, "calls": 90,
                                                         "status": "pass" if verdict == "pass" else verdict}}
    return {"schema": "gauntlet.eval/1", "problem": problem, "solution": solution, "path": f"solutions/{solution}.py",
            "backend": backend, "device": device, "verdict": verdict, "reasons": list(reasons), "cases": cases,
            "skipped": {"float32": "not in the solution's DTYPES"}, "timings": timings, "score": score,
            "seed": 123, "elapsed_s": 1.0}


def _doc(records, gpu="NVIDIA H100 80GB HBM3", device="cuda"):
    return {"schema": "gauntlet.run/1", "created": "2025-01-01T00:00:00+00:00", "updated": "2025-01-01T01:00:00+00:00",
            "environment": {"gpu": gpu, "device": device, "sm_count": 132, "torch": "2.9.0", "triton": "3.5.0",
                            "cupy": None, "cutlass_dsl": "4.2.0", "git_commit": "0123456789abcdef-dirty", "host": "h"},
            "peaks": {"bfloat16": {"tflops": 790.1}, "copy_gbps": 3000.0} if device == "cuda" else {},
            "records": records}


@pytest.fixture
def gpu_doc():
    return _doc([
        _record("gemm", "slow_tiled", speedups=(0.5, 0.7)),
        _record("gemm", "fast_tiled", speedups=(1.6, 1.2)),
        _record("gemm", "mid_tiled", speedups=(0.9, 1.1)),
        _record("gemm", "broken", verdict="fail", reasons=[
            {"code": "mismatch", "detail": f"max error 3.2 at (0, 1) {INJECTION}" + "x" * 1000,
             "repro": "gauntlet eval gemm broken --case M=3,N=5,K=7,seed=1"}]),
        _record("gemm", "cupy_raw", verdict="unsupported", backend="cupy",
                reasons=[{"code": "unsupported", "detail": "cupy is not installed", "repro": ""}]),
        _record("softmax", "online", speedups=(1.3,), base="torch"),
        _record("softmax", "crashy", verdict="error",
                reasons=[{"code": "crash", "detail": "RuntimeError: boom", "repro": "gauntlet eval softmax crashy"}]),
    ])


def _write(tmp_path, doc, name="run.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _table(md: str, title_part: str) -> tuple[list[str], list[list[str]]]:
    """(headers, rows of cells) of the leaderboard table whose heading contains title_part."""
    section = md.split(title_part, 1)[1].split("\n### ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in lines]
    return cells[0], cells[2:]


def _board(md: str, title_part: str) -> list[str]:
    """Solution names, in order, of the leaderboard table whose heading contains title_part."""
    headers, rows = _table(md, title_part)
    return [row[headers.index("solution")] for row in rows]


def test_files_written(tmp_path, gpu_doc):
    result = build([_write(tmp_path, gpu_doc)], tmp_path / "out")
    assert result["markdown"] == tmp_path / "out" / "leaderboard.md" and result["markdown"].is_file()
    assert result["html"] == tmp_path / "out" / "leaderboard.html" and result["html"].is_file()
    assert result["rows"] == 7
    md = result["markdown"].read_text()
    assert "NVIDIA H100 80GB HBM3" in md and "commit 0123456789ab-dirty" in md and "bfloat16 790.1 TFLOP/s" in md
    assert "M=4096 N=4096 K=4096" in md and "1.60× [1.58, 1.62]" in md
    page = result["html"].read_text()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    # Self-contained: every link and reference is to an anchor of the page itself (the inline SVG's <use> too).
    targets = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page.split("<body>")[1])
    assert targets and all(t.startswith("#") for t in targets), [t for t in targets if not t.startswith("#")]


def test_rows_ranked_by_speedup(tmp_path, gpu_doc):
    md = build([_write(tmp_path, gpu_doc)], tmp_path / "out")["markdown"].read_text()
    assert _board(md, "gemm · bfloat16") == ["fast_tiled", "mid_tiled", "slow_tiled", "broken", "cupy_raw"]
    assert _board(md, "softmax · bfloat16") == ["online", "crashy"]
    assert "vs cublas" in md and "vs torch" in md


def test_failures_carry_reason_code(tmp_path, gpu_doc):
    out = build([_write(tmp_path, gpu_doc)], tmp_path / "out")
    md = out["markdown"].read_text()
    broken_row = next(line for line in md.splitlines() if line.startswith("| ") and "| broken |" in line)
    assert "fail (mismatch)" in broken_row
    assert "error (crash)" in md and "unsupported (unsupported)" in md
    assert "## Failures" in md and "gauntlet eval gemm broken --case M=3,N=5,K=7,seed=1" in md
    assert "more characters]" in md and "x" * 400 not in md          # detail truncated
    assert "fail (mismatch)" in markdown_table([gpu_doc])


def test_html_escapes_untrusted_detail(tmp_path, gpu_doc):
    gpu_doc["records"][3]["solution"] = "evil<img src=x onerror=alert(1)>"
    page = build([_write(tmp_path, gpu_doc)], tmp_path / "out")["html"].read_text()
    assert INJECTION not in page and "<script" not in page.lower() and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert re.search(r'class="[^"]*v-fail[^"]*"', page) and "Content-Security-Policy" in page
    md = (tmp_path / "out" / "leaderboard.md").read_text()
    assert "<img" not in md                                        # table cells escaped in Markdown too


def test_wrong_schema_names_file(tmp_path, gpu_doc):
    bad = copy.deepcopy(gpu_doc)
    bad["schema"] = "gauntlet.run/0"
    path = _write(tmp_path, bad, "old.json")
    with pytest.raises(ValueError, match=r"old\.json.*schema"):
        build([path], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("records"), r"records"),
    (lambda d: d["records"][0].update(verdict="maybe"), r"records\[0\]\.verdict"),
    (lambda d: d["records"][1].update(timings={}), r"records\[1\]\.timings"),
])
def test_malformed_records_name_file_and_field(tmp_path, gpu_doc, mutate, message):
    mutate(gpu_doc)
    with pytest.raises(ValueError, match=r"run\.json.*" + message):
        build([_write(tmp_path, gpu_doc)], tmp_path / "out")


def test_missing_and_non_json_files(tmp_path):
    with pytest.raises(ValueError, match=r"nope\.json: no such file"):
        build([tmp_path / "nope.json"], tmp_path / "out")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"junk\.json: not JSON"):
        build([tmp_path / "junk.json"], tmp_path / "out")


def test_groups_by_machine_and_later_file_replaces(tmp_path, gpu_doc):
    newer = _doc([_record("gemm", "slow_tiled", speedups=(2.0, 2.0))])
    cpu = _doc([_record("gemm", "slow_tiled", device="cpu"),
                _record("gemm", "cupy_raw", verdict="unsupported", backend="cupy", device="cpu",
                        reasons=[{"code": "unsupported", "detail": "no GPU"}])], gpu=None, device="cpu")
    paths = [_write(tmp_path, gpu_doc, "a.json"), _write(tmp_path, newer, "b.json"), _write(tmp_path, cpu, "c.json")]
    md = build(paths, tmp_path / "out")["markdown"].read_text()
    assert _board(md, "NVIDIA H100 80GB HBM3 — gemm · bfloat16")[0] == "slow_tiled"   # replaced by b.json
    assert _board(md, "CPU — gemm · bfloat16") == ["slow_tiled", "cupy_raw"]
    headers, rows = _table(md, "CPU — gemm · bfloat16")
    assert headers == ["solution", "backend", "verdict", "cases", "judged in"]      # no speed on CPU: no such columns
    assert rows[0] == ["slow_tiled", "triton", "pass", "30 ex / 90 calls", "1.0 s"]
    assert "peaks: not measured" in md


def test_constants_match_harness_and_reports_import_no_torch():
    from gauntlet.reasons import VERDICTS
    from gauntlet.judge.records.results import EVAL_SCHEMA, RUN_SCHEMA
    mirrored = (leaderboard.RUN_SCHEMA, leaderboard.EVAL_SCHEMA, leaderboard.VERDICTS)
    assert mirrored == (RUN_SCHEMA, EVAL_SCHEMA, VERDICTS)
    for path in Path(leaderboard.__file__).parent.glob("*.py"):       # every module of the reports package
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & {"torch", "harness", "triton", "cupy"}, (path.name, imported)


def test_records_judged_under_other_settings_are_flagged(tmp_path):
    a = _record("gemm", "fast_tiled", speedups=(1.6, 1.2))
    b = _record("gemm", "slow_tiled", speedups=(0.5, 0.7))
    a["fingerprint"] = {"harness": "aaaa", "options": {"examples": 30, "timing_budget_s": 15.0}}
    b["fingerprint"] = {"harness": "bbbb", "options": {"examples": 3, "timing_budget_s": 15.0}}
    result = build([_write(tmp_path, _doc([a, b]))], tmp_path / "out")
    md = result["markdown"].read_text()
    assert "## Settings" in md and "2 different settings" in md and "harness versions aaaa, bbbb" in md
    assert "options differ in: examples" in md
    b["fingerprint"] = copy.deepcopy(a["fingerprint"])
    result = build([_write(tmp_path, _doc([a, b]), "run2.json")], tmp_path / "out2")
    assert "## Settings" not in result["markdown"].read_text()


def test_a_cpu_run_lists_verdicts_without_a_fake_ranking(tmp_path):
    records = [_record("gemm", name, device="cpu") for name in ("b_tiled", "a_tiled")]
    md = build([_write(tmp_path, _doc(records, device="cpu"))], tmp_path / "out")["markdown"].read_text()
    headers, rows = _table(md, "CPU — gemm · bfloat16")
    assert "#" not in headers and [row[0] for row in rows] == ["a_tiled", "b_tiled"], (headers, rows)


def _cli(capsys, *argv) -> tuple[int, str, str]:
    """`gauntlet ...` in this process (as tests/test_searchpath.py does): a subprocess would spend seconds
    importing torch for a command that reads JSON."""
    from gauntlet import cli
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_report_reads_eval_json_and_eval_many_lines_too(tmp_path, capsys):
    """One leaderboard for every output: a real H100 `eval --json` record and real H100 eval-many lines
    (tests/data), beside each other; --json says what was written."""
    data = Path(__file__).parent / "data"
    code, out, err = _cli(capsys, "report", data / "h100_triton_tiled_1.json", data / "h100_eval_many.jsonl",
                          "-o", tmp_path, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "gauntlet.report/1" and doc["rows"] == 5
    md = (tmp_path / "leaderboard.md").read_text()
    assert "NVIDIA H100 80GB HBM3" in md and "a_triton_tiled" in md and "c_zeros" in md and "mismatch" in md


# ------------------------------------------------------------------------------------------------- the page

class _Page(HTMLParser):
    """The page's elements as (tag, attributes, ancestors' tags) and its text, by the standard library's parser."""

    def __init__(self, text: str):
        super().__init__()
        self.elements, self.stack, self.text = [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), tuple(self.stack)))
        if tag not in ("meta", "br", "input", "link", "img", "path", "use", "stop") and not tag.endswith("/"):
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), tuple(self.stack)))

    def handle_endtag(self, tag):
        if tag in self.stack:
            while self.stack.pop() != tag:
                pass

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag, cls=None) -> list[dict]:
        return [a for t, a, _ in self.elements if t == tag and (cls is None or cls in (a.get("class") or "").split())]


def _page(tmp_path, doc) -> tuple[str, _Page]:
    text = build([_write(tmp_path, doc)], tmp_path / "out")["html"].read_text()
    return text, _Page(text)


def test_page_has_a_grid_a_contents_and_links_that_land(tmp_path, gpu_doc):
    text, page = _page(tmp_path, gpu_doc)
    assert len(page.having("table", "grid")) == 1 and page.having("nav", "toc")
    cells = page.having("td", "cell")
    verdicts = sorted(c["class"].split()[1] for c in cells)
    assert verdicts == ["v-error", "v-fail", "v-pass", "v-pass", "v-pass", "v-pass"]     # unsupported left out
    assert "1.39×" in text                                       # fast_tiled's geomean (1.6 x 1.2) ** 0.5 in its cell
    ids = {a["id"] for _, a, _ in page.elements if "id" in a}
    links = [a["href"] for _, a, _ in page.elements if a.get("href", "").startswith("#")]
    assert links and all(link[1:] in ids for link in links), sorted(set(links) - {f"#{i}" for i in ids})
    # A cell links to its solution's row (a pass) or to its reasons (a failure).
    fail_cell = next(c for c in cells if "v-fail" in c["class"])
    assert "broken" in fail_cell["title"] and "mismatch" in fail_cell["title"]


def test_problems_with_failures_come_first_and_unsupported_is_collapsed(tmp_path):
    doc = _doc([_record("attention", "fine", speedups=(1.1, 1.2)),
                _record("zzz_gemm", "ok", speedups=(1.0, 1.0)),
                _record("zzz_gemm", "bad", verdict="timeout", reasons=[{"code": "timeout", "detail": "slow"}]),
                _record("zzz_gemm", "cupy_raw", verdict="unsupported", backend="cupy",
                        reasons=[{"code": "unsupported", "detail": "cupy is not installed"}])])
    text, page = _page(tmp_path, doc)
    assert text.index(">zzz_gemm<") < text.index(">attention<")                          # failing first: contents
    assert text.split('id="g0-p0"')[1].startswith(">\n<h3>zzz_gemm")                      # and sections
    rows = [line for line in text.split('<table class="grid">')[1].split("</table>")[0].split("<tr>")[2:]]
    assert "zzz_gemm" in rows[0] and "attention" in rows[1] and "1 " not in rows[1]
    details = text.split('<details class="unsupported">')[1].split("</details>")[0]
    assert "cupy_raw" in details and "cupy is not installed" in details
    boards = [t for t in text.split('<table class="board">')[1:]]
    assert not any("cupy_raw" in t.split("</table>")[0] for t in boards)           # not among the ranked rows
    assert "cupy_raw" not in text.split('<h4>Why they failed</h4>')[1].split("<details")[0]


def test_each_timed_problem_has_its_charts_and_shapes_with_dimension_names(tmp_path, gpu_doc):
    text, page = _page(tmp_path, gpu_doc)
    figures = page.having("figure")
    kinds = sorted(f["class"] for f in figures)
    assert kinds == ["chart chart-roofline", "chart chart-roofline", "chart chart-speedup", "chart chart-speedup"]
    svgs = [(a, anc) for t, a, anc in page.elements if t == "svg"]
    assert len(svgs) == 4 and all("figure" in anc for _, anc in svgs)
    assert '<span class="shape"' in text and "M=128 N=14336 K=4096" in text
    # The roofline's ceilings are the run's measured peaks: 790.1 TFLOP/s bf16, 3000 GB/s copy.
    roofline = text.split('chart-roofline')[1].split("</figure>")[0]
    assert "bfloat16 peak 790 TFLOP/s" in roofline and "copy 3000 GB/s" in roofline
    ids = [a["id"] for t, a, _ in page.elements if "id" in a and t not in ("section", "tr", "div", "h2", "ol")]
    assert len(ids) == len(set(ids)), "two inline charts share an id"


def test_a_cpu_page_shows_what_the_cpu_can_show(tmp_path):
    records = [_record("gemm", "a_tiled", device="cpu"), _record("gemm", "b_bad", device="cpu", verdict="fail",
                                                                 reasons=[{"code": "mismatch", "detail": "off"}])]
    text, page = _page(tmp_path, _doc(records, gpu=None, device="cpu"))
    board = text.split('<table class="board">')[1].split("</table>")[0]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", board)
    assert headers == ["solution", "backend", "verdict", "cases", "judged in"]
    assert "—" not in board and "30 ex / 90 calls" in board and "1.0 s" in board
    cells = [c for c in page.having("td", "cell")]
    assert sorted(c["class"] for c in cells) == ["cell v-fail", "cell v-pass"]
    assert not page.having("figure") and "Not timed on this machine" in text


HOSTILE = ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>', "--><script>alert(2)</script><!--",
           "a$\\frac{1}$b"]


def test_every_string_from_a_result_is_escaped_in_the_page_and_its_charts(tmp_path):
    """Names, backends, reasons, repro lines, sources and dtypes all come from results (and so, in part, from
    candidates): the page must show them as text, in tables, the grid's titles and the charts' SVG alike."""
    evil = " ".join(HOSTILE)
    fast = _record(f"gemm{evil}", f"fast{evil}", speedups=(1.6, 1.2), backend=f"triton{evil}", base=f"cublas{evil}")
    for timing in fast["timings"]:
        timing["source"] = f"src{evil}"
    broken = _record(f"gemm{evil}", f"broken{evil}", verdict="fail",
                     reasons=[{"code": f"mismatch{evil}", "detail": evil, "repro": f"gauntlet eval {evil}"}])
    odd = _record(f"gemm{evil}", f"gone{evil}", verdict="unsupported",
                  reasons=[{"code": "unsupported", "detail": evil}])
    doc = _doc([fast, broken, odd], gpu=f"H100{evil}")
    doc["environment"]["host"] = evil
    text, page = _page(tmp_path, doc)
    assert "<script" not in text.lower() and "<img" not in text.lower() and '"><img' not in text
    assert {t for t, _, _ in page.elements} <= {"html", "head", "meta", "title", "style", "body", "nav", "p", "ol",
                                               "li", "a", "main", "h1", "h2", "h3", "h4", "table", "thead", "tbody",
                                               "tr", "th", "td", "span", "section", "div", "figure", "figcaption",
                                               "details", "summary", "ul", "strong", "pre", "br", "em", "dl", "dt", "dd"} | SVG_TAGS
    assert not [a for _, a, _ in page.elements if any(k.startswith("on") for k in a)]
    assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 10
    assert len(page.having("figure")) == 2                                # the charts drew the names, as text


SVG_TAGS = {"svg", "metadata", "rdf:rdf", "cc:work", "dc:type", "dc:date", "dc:format", "dc:creator", "cc:agent",
            "dc:title", "defs", "style", "g", "path", "use", "text", "clippath", "rect", "polyline", "line", "tspan"}


def test_report_compare_puts_the_comparison_in_both_pages(tmp_path, capsys):
    """`gauntlet report BASE NEW --compare`: a planted 10% slowdown of a real H100 record is flagged in the page,
    and --compare with anything but two files is the user's error."""
    data = Path(__file__).parent / "data"
    slow = json.loads((data / "h100_triton_tiled_2.json").read_text())
    for timing in slow["timings"]:
        for side in timing["baselines"].values():
            side["speedup"] /= 1.10
            side["ci95"] = [x / 1.10 for x in side["ci95"]]
    new = _write(tmp_path, slow, "new.json")
    code, out, err = _cli(capsys, "report", data / "h100_triton_tiled_1.json", new, "-o", tmp_path / "out",
                          "--compare", "--json")
    assert code == 0, err                              # a report, not a gate: `gauntlet compare` sets the status
    assert json.loads(out)["regressions"] == 1
    page = (tmp_path / "out" / "leaderboard.html").read_text()
    section = page.split('<h2 id="comparison">')[1].split("<h2")[0]
    assert "1 regression(s)" in section and 'class="num slower"' in section and "gemm/triton_tiled@cuda" in section
    assert 'href="#comparison"' in page
    assert "## Comparison" in (tmp_path / "out" / "leaderboard.md").read_text()
    code, out, _ = _cli(capsys, "report", data / "h100_triton_tiled_1.json", "-o", tmp_path / "one", "--compare",
                        "--json")
    assert code == 2 and "exactly two" in json.loads(out)["error"] and not (tmp_path / "one").exists()
    code, out, _ = _cli(capsys, "report", data / "h100_triton_tiled_1.json", "-o", tmp_path / "one", "--fail-on", "3",
                        "--json")
    assert code == 2 and "--fail-on" in json.loads(out)["error"] and not (tmp_path / "one").exists()


def test_odd_numbers_from_older_or_damaged_files_still_render(tmp_path):
    """NaN, nulls, a zero or negative figure, an interval that is no interval, a shape as a bare list: the page and
    its charts leave out what cannot be drawn and render the rest."""
    record = _record("gemm", "odd", speedups=(1.3, 0.8))
    first, second = record["timings"]
    first["baselines"]["cublas"].update(speedup=float("nan"), ci95=[None, 2.0])
    second["baselines"]["cublas"]["ci95"] = [0.0, -1.0]
    second.update(shape=[128, 14336, 4096], gbps=0.0, tflops=-5.0)
    doc = _doc([record, _record("gemm", "fine", speedups=(1.1, 1.0))])
    doc["peaks"] = {"bfloat16": {"tflops": -1.0}, "copy_gbps": float("nan")}
    text, page = _page(tmp_path, doc)
    assert len(page.having("figure")) == 2 and "128x14336x4096" in text and "nan" not in text.lower()


def test_a_problem_whose_every_timed_record_failed_still_renders(tmp_path):
    """Real records (an H200, gemm_bias_gelu): both solutions failed after their timing, so the problem has a
    roofline (their TFLOP/s) but no speedup chart (speedups rank passes only). The page shows what it has."""
    from gauntlet.reports.leaderboard import build
    build([str(Path(__file__).parent / "data" / "h200_timings_all_failed.json")], str(tmp_path))
    html = (tmp_path / "leaderboard.html").read_text()
    assert "chart-roofline" in html and "chart-speedup" not in html
