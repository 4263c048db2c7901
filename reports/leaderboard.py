"""Leaderboards from results files, as Markdown and as one self-contained HTML page: the entry point.

The work is split by concern (modules of gauntlet.reports): load reads and checks the files, machines groups records
by where they ran, tables ranks them, explain says what the figures mean (with baselines naming each baseline), model
assembles what both renderers need, markdown and page (a jinja2 template, with charts' SVG) render it, and compare sets
two runs side by side.
Everything here is data in, text out: no torch, no kernels, no harness import.
"""
from __future__ import annotations

from pathlib import Path

from . import compare as compare_mod
from .load import (EVAL_SCHEMA, MANY_SCHEMA, RUN_SCHEMA, VERDICTS, BadResults, load_runs, read_run,
                   validate_run)
from .machines import merge_groups
from .markdown import boards_markdown, render_markdown
from .model import assemble_report, group_view
from .page import render_html

__all__ = ["build", "markdown_table", "read_run", "RUN_SCHEMA", "EVAL_SCHEMA", "MANY_SCHEMA", "VERDICTS"]


def build(paths: list, out_dir, compare: bool = False, fail_on: float = 5.0) -> dict:
    """Write out_dir/leaderboard.md and out_dir/leaderboard.html from the given results files.

    With `compare`, exactly two files are expected (BASE, NEW) and both pages carry gauntlet.reports.compare's
    comparison of them (threshold `fail_on` percent); the leaderboard itself shows NEW's records over BASE's, as
    always.

    Returns {"markdown": Path, "html": Path, "rows": n, "compare": the comparison or None}, n being the number of
    leaderboard rows (one per solution per problem/dtype table). Raises BadResults (a ValueError) naming the file
    for any unreadable or malformed input, before anything is written, so a bad file never leaves a half-updated
    report.
    """
    runs = load_runs(paths)
    doc = None
    if compare:
        if len(paths) != 2:
            raise BadResults(f"--compare takes exactly two results files (BASE NEW), got {len(paths)}")
        doc = compare_mod.compare(*(compare_mod.records_of(name, run) for name, run in runs), fail_on)
    report = assemble_report(runs, compare=doc, compare_names=tuple(str(p) for p in paths) if compare else ())
    markdown, page = render_markdown(report), render_html(report)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md_path, html_path = out / "leaderboard.md", out / "leaderboard.html"
    md_path.write_text(markdown, encoding="utf-8")
    html_path.write_text(page, encoding="utf-8")
    return {"markdown": md_path, "html": html_path, "rows": sum(len(b.table.rows) for b in report.boards),
            "compare": doc}


def markdown_table(docs: list) -> str:
    """The leaderboard tables alone (no header, timings or failures), for pasting into notes.

    `docs` are already-loaded run documents; they are validated like files, named docs[i] in errors.
    """
    runs = [(f"docs[{i}]", validate_run(doc, f"docs[{i}]")) for i, doc in enumerate(docs)]
    groups = [group_view(i, g) for i, g in enumerate(merge_groups(runs))]
    return boards_markdown([b for g in groups for p in g.problems for b in p.boards])
