"""The leaderboard as Markdown, for a terminal, a CI log or a PR comment.

Details and repro strings were produced while running untrusted candidates: table cells and headings are escaped
(no raw HTML, no cell breaks) and longer text is fenced as code with a fence it cannot close.
"""
from __future__ import annotations

import html

from . import compare as compare_mod
from .formatting import DASH, truncate
from .model import Report
from .tables import Board, Table


def render_markdown(report: Report) -> str:
    parts = ["# Gauntlet leaderboard", "",
             f"Generated {report.generated} from {len(report.runs)} results file(s).", "", "## Runs", ""]
    for run in report.runs:
        parts += [f"- **{md_text(run['file'])}** ({run['records']} records, {md_text(run['created'])} → "
                  f"{md_text(run['updated'])})  ",
                  f"  {md_text(run['environment'])}  ", f"  peaks: {md_text(run['peaks'])}"]
        if run["interrupted"]:
            parts[-1] += "  "
            parts.append(f"  **{md_text(run['interrupted'])}**")
    if report.settings:
        parts += ["", "## Settings", ""] + [f"- {md_text(w)}" for w in report.settings]
    if report.compare is not None:
        parts += ["", compare_mod.markdown(report.compare, report.compare_names).replace("## gauntlet compare",
                                                                                        "## Comparison", 1)]
    parts += format_markdown_explanations(report)
    parts += ["", "## Leaderboard", ""]
    parts += [format_markdown_board(b) for b in report.boards] or ["_No records._", ""]
    if report.details:
        parts += ["## Per-shape timings", ""]
        for label, table in report.details:
            parts += [f"### {md_text(label)}", "", format_markdown_table(table)]
    if report.failures:
        parts += ["## Failures", ""]
        parts += [format_markdown_failure(label, record) for label, record in report.failures]
    if report.unsupported:
        parts += ["## Unsupported", "", "Not failures: the backend cannot run on that machine.", ""]
        parts += [format_markdown_unsupported(label, record) for label, record in report.unsupported]
    return "\n".join(parts).rstrip() + "\n"


def format_markdown_explanations(report: Report) -> list[str]:
    """What the figures and words mean, per machine (gauntlet.reports.explain), as one bullet per term."""
    parts = []
    for group in report.groups:
        if group.explain is None:
            continue
        parts += ["", f"## How to read this: {md_text(group.label)}", ""]
        for term, text, listed in group.explain.items:
            parts.append(f"- **{md_text(term)}**: {md_text(text)}")
            if listed == "baselines":
                parts += [f"  - {md_text(problem)}: **{md_text(label)}**" + (f", {md_text(what)}" if what else "")
                          + ("" if ranks else " (extra column)")
                          for problem, label, what, ranks in group.explain.baselines]
            elif listed == "codes":
                parts += [f"  - **{md_text(code)}** ({md_text(verdict)}): {md_text(meaning)}"
                          for code, verdict, meaning in group.explain.codes]
    return parts


def boards_markdown(boards: list[Board]) -> str:
    """The leaderboard tables alone, for pasting into notes."""
    return "\n".join(format_markdown_board(b) for b in boards) or "_No records._\n"


def format_markdown_board(board: Board) -> str:
    return f"### {md_text(board.title)}\n\n{format_markdown_table(board.table.compact())}"


def format_markdown_table(table: Table) -> str:
    align = ["---:" if i in table.numeric else "---" for i in range(len(table.headers))]
    lines = ["| " + " | ".join(md_text(h) for h in table.headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def format_markdown_failure(label: str, record: dict) -> str:
    """Reasons as fenced code: detail and repro are candidate-influenced text, inert inside a fence."""
    lines = [f"### {md_text(label)} — {md_text(record['problem'])} / {md_text(record['solution'])}: "
             f"{md_text(record['verdict'])}", ""]
    for reason in record.get("reasons", []) or [{"code": DASH, "detail": "no reason recorded"}]:
        lines += [f"**{md_text(reason.get('code', '?'))}**", "", md_fence(truncate(reason.get("detail", "")), "text")]
        if reason.get("repro"):
            lines += ["Repro:", "", md_fence(str(reason["repro"]), "sh")]
    return "\n".join(lines)


def format_markdown_unsupported(label: str, record: dict) -> str:
    why = "; ".join(truncate(r.get("detail", ""), 160) for r in record.get("reasons", [])) or "no reason recorded"
    return f"- {md_text(label)} — {md_text(record['problem'])} / {md_text(record['solution'])}: {md_text(why)}"


def md_text(text) -> str:
    """Make text safe inside a Markdown table cell or heading: no raw HTML, no cell breaks, one line."""
    text = html.escape(str(text), quote=False).replace("|", "\\|").replace("`", "\\`")
    return " ".join(text.split())


def md_fence(text: str, lang: str) -> str:
    """A code fence longer than any backtick run in the text, so the text cannot close it early."""
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}\n"
