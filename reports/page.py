"""The leaderboard as one self-contained HTML page: reports/templates/leaderboard.html filled from the report model,
with the charts inlined as SVG.

jinja2 escapes every value from a result (autoescape on for every template, whatever its name); the only markup
inserted as is, the charts, is SVG drawn here by matplotlib, which escapes the names it draws. The page loads
nothing and runs nothing: no script, no external file, and a Content-Security-Policy that allows only inline style.
"""
from __future__ import annotations

import jinja2

from . import charts
from .formatting import truncate
from .model import ProblemView, Report


def render_html(report: Report) -> str:
    draw_charts(report)
    return _environment().get_template("leaderboard.html").render(report=report)


def draw_charts(report: Report) -> None:
    """Each problem's speedup chart (when anything was timed against a baseline) and roofline (when anything has
    a FLOP/byte figure), drawn once per problem, in one colour and marker per solution across both."""
    for group in report.groups:
        for problem in group.problems:
            palette = charts.styles([r["solution"] for r in problem.records])
            if problem.speedups["series"]:
                problem.charts["speedup"] = charts.speedup_chart(problem.speedups, palette,
                                                                 f"{problem.anchor}-speedup")
            if problem.roofline["series"]:
                problem.charts["roofline"] = charts.roofline_chart(problem.roofline, palette,
                                                                   f"{problem.anchor}-roofline")


def row_anchors(problem: ProblemView, board: int):
    """For the template: the id of each solution's row in one of the problem's boards."""
    return lambda solution: problem.row_anchor(board, solution)


def _environment() -> jinja2.Environment:
    # autoescape=True rather than select_autoescape: the stylesheet is included as template text and the page must
    # be escaped whatever a template file is called. StrictUndefined: a misspelt field fails the test, not the page.
    env = jinja2.Environment(loader=jinja2.PackageLoader("gauntlet.reports", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=False, keep_trailing_newline=True)
    env.filters["cap"] = truncate
    env.globals["row_anchors"] = row_anchors
    return env
