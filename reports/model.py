"""The report as data: per machine, a summary grid and one view per problem (tables, failures, chart data).

Both renderers read this and nothing else: gauntlet.reports.markdown prints it, gauntlet.reports.page fills the HTML
template and gauntlet.reports.charts draws the chart data. Problems with a failure come first (they need attention);
within a problem, `unsupported` records (the backend cannot run here: not a failure, by the README's words) are kept
apart.

Anchors are made of indexes only ("g0-p3-d0-s2"), never of names from a result, so no result can shape an id.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

from .explain import Explanation, explain_group
from .formatting import DASH, ci_bounds, format_shape, format_speedup, number
from .machines import Group, ceilings, describe_run, merge_groups, settings_warnings
from .tables import (FAILED, Board, Table, detail_table, format_cases, format_verdict, geomean, intensity,
                            problem_boards, rank_records)

# With at most this many distinct solution names on a machine, the grid's columns are the names (a solution's
# column reads down the problems); with more (names rarely repeat across problems), the columns are ranks.
GRID_NAME_COLUMNS = 8


@dataclass
class GridCell:
    solution: str
    verdict: str
    text: str          # the geomean speedup ("1.23×"), or the verdict where nothing was timed
    title: str         # the hover text: verdict with reason codes, baseline, cases
    anchor: str        # a passing solution's row in its problem's table, a failing one's reasons


@dataclass
class GridRow:
    label: str         # "gemm · bfloat16"
    anchor: str        # the problem's section
    failing: bool
    cells: list        # one GridCell or None per column
    unsupported: int   # how many unsupported solutions the row leaves out


@dataclass
class Grid:
    columns: list
    by_name: bool
    rows: list
    timed: bool        # False on a CPU run: cells show verdicts, not speedups


@dataclass
class ProblemView:
    problem: str
    anchor: str
    failing: bool
    records: list                  # in rank order (of the first dtype)
    boards: list                   # [Board], one per dtype
    failures: list                 # records whose verdict is fail, error, timeout or interrupted
    unsupported: list              # records the device could not run
    detail: Table                  # per-shape timings
    speedups: dict                 # chart data, see speedup_data
    roofline: dict                 # chart data, see roofline_data
    shapes: list                   # [(dims named, where the shape comes from)]
    index: dict = field(default_factory=dict)    # solution -> its number in anchors
    charts: dict = field(default_factory=dict)   # filled by gauntlet.reports.page: name -> SVG text

    def row_anchor(self, board: int, solution: str) -> str:
        return f"{self.anchor}-d{board}-s{self.index.get(solution, 0)}"

    def why_anchor(self, solution: str) -> str:
        """A failing solution's reasons, below its problem's tables."""
        return f"{self.anchor}-why-s{self.index.get(solution, 0)}"


@dataclass
class GroupView:
    label: str
    anchor: str
    problems: list
    grid: Grid
    ceilings: dict
    explain: Explanation | None = None   # what the group's figures mean (gauntlet.reports.explain)


@dataclass
class Report:
    generated: str
    runs: list                     # one dict per results file (gauntlet.reports.machines.describe_run)
    groups: list                   # [GroupView]
    settings: list                 # warnings: records of one machine judged under other settings
    compare: dict | None = None    # a gauntlet.reports.compare document, when two runs were compared
    compare_names: tuple = ()

    @property
    def boards(self) -> list[Board]:
        return [b for g in self.groups for p in g.problems for b in p.boards]

    @property
    def failures(self) -> list:
        return [(g.label, r) for g in self.groups for p in g.problems for r in p.failures]

    @property
    def unsupported(self) -> list:
        return [(g.label, r) for g in self.groups for p in g.problems for r in p.unsupported]

    @property
    def details(self) -> list:
        return [(f"{g.label} — {p.problem}", p.detail) for g in self.groups for p in g.problems if p.detail.rows]


def assemble_report(runs: list[tuple[str, dict]], compare: dict | None = None, compare_names: tuple = ()) -> Report:
    """Turn validated run documents into everything both renderers need."""
    groups = merge_groups(runs)
    views = [group_view(i, g) for i, g in enumerate(groups)]
    for group, view in zip(groups, views):
        view.explain = explain_group(group, view, runs)
    return Report(generated=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  runs=[describe_run(name, doc) for name, doc in runs], groups=views,
                  settings=[w for g in groups for w in settings_warnings(g)],
                  compare=compare, compare_names=compare_names)


def group_view(gi: int, group: Group) -> GroupView:
    by_problem: dict[str, list] = {}
    for key in sorted(group.records):
        by_problem.setdefault(key[0], []).append(group.records[key])
    # Failures first: a problem with a failing record needs attention before a ranking is worth reading.
    order = sorted(by_problem, key=lambda p: (not any(r["verdict"] in FAILED for r in by_problem[p]), p))
    peaks = ceilings(group)
    problems = [problem_view(group.label, f"g{gi}-p{pi}", name, by_problem[name], peaks)
                for pi, name in enumerate(order)]
    return GroupView(group.label, f"g{gi}", problems, summary_grid(problems), peaks)


def problem_view(group: str, anchor: str, problem: str, records: list[dict], peaks: dict) -> ProblemView:
    boards = problem_boards(group, problem, records)
    primaries = {b.dtype: b.primary for b in boards}
    ranked = rank_records(records, boards[0].dtype, boards[0].primary)
    return ProblemView(problem=problem, anchor=anchor, failing=any(r["verdict"] in FAILED for r in records),
                       records=ranked, boards=boards, failures=[r for r in ranked if r["verdict"] in FAILED],
                       unsupported=[r for r in ranked if r["verdict"] == "unsupported"],
                       detail=detail_table(ranked), speedups=speedup_data(ranked, primaries),
                       roofline=roofline_data(ranked, peaks), shapes=list_shapes(records),
                       index={r["solution"]: i for i, r in enumerate(records)})


def list_shapes(records: list[dict]) -> list[tuple[str, str]]:
    """The benchmark shapes timed, dims named, with where each comes from (problem.yaml's `source`)."""
    seen: dict[str, str] = {}
    for record in records:
        for timing in record.get("timings", []):
            seen.setdefault(format_shape(timing.get("shape")), str(timing.get("source") or ""))
    return list(seen.items())


# ------------------------------------------------------------------------------------------------- the grid

def summary_grid(problems: list[ProblemView]) -> Grid:
    """Problems x solutions: one row per problem and dtype, one cell per solution that could run there."""
    rows = [(p, b, di) for p in problems for di, b in enumerate(p.boards)]
    names = list(dict.fromkeys(s for _, b, _ in rows for s, v in zip(b.table.solutions, b.table.verdicts)
                               if v != "unsupported"))
    by_name = len(names) <= GRID_NAME_COLUMNS
    timed = any(p.detail.rows for p in problems)
    grid_rows = []
    for problem, board, di in rows:
        cells = grid_cells(problem, board, di)
        label = problem.problem + (f" · {board.dtype}" if board.dtype else "")
        unsupported = sum(v == "unsupported" for v in board.table.verdicts)
        placed = [next((c for c in cells if c.solution == n), None) for n in names] if by_name else cells
        grid_rows.append(GridRow(label, problem.anchor, problem.failing, placed, unsupported))
    width = len(names) if by_name else max((len(r.cells) for r in grid_rows), default=0)
    for row in grid_rows:
        row.cells += [None] * (width - len(row.cells))
    columns = names if by_name else [ordinal(i + 1) for i in range(width)]
    return Grid(columns, by_name, grid_rows, timed)


def grid_cells(problem: ProblemView, board: Board, di: int) -> list[GridCell]:
    """The board's solutions in rank order, unsupported left out (the row counts them instead)."""
    records = {r["solution"]: r for r in problem.records}
    cells = []
    for solution, verdict in zip(board.table.solutions, board.table.verdicts):
        if verdict == "unsupported":
            continue
        record = records[solution]
        speed = geomean(record, board.dtype, board.primary) if verdict == "pass" else None
        text = format_speedup(speed) if speed is not None else verdict
        title = f"{solution}: {format_verdict(record)}"
        if speed is not None:
            title += f", geomean {format_speedup(speed)} over {board.primary}"
        cases = format_cases(record, board.dtype)
        title += f"; {cases}" if cases != DASH else ""
        anchor = problem.row_anchor(di, solution) if verdict == "pass" else problem.why_anchor(solution)
        cells.append(GridCell(solution, verdict, text, title, anchor))
    return cells


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


# ------------------------------------------------------------------------------------------------ chart data

def speedup_data(records: list[dict], primaries: dict) -> dict:
    """Per benchmark shape, each solution's speedup over its dtype's first baseline with the 95% interval.

    {"rows": [label], "series": [{"name", "points": [(row, speedup, low, high)]}], "baseline": text}
    """
    keys: dict[tuple, int] = {}
    series = []
    for record in records:
        points = []
        for timing in record.get("timings", []):
            base = (timing.get("baselines") or {}).get(primaries.get(timing.get("dtype")))
            speed = number((base or {}).get("speedup"))
            if speed is None or speed <= 0:
                continue
            key = (timing.get("dtype"), format_shape(timing.get("shape")))
            row = keys.setdefault(key, len(keys))
            low, high = ci_bounds(base.get("ci95")) or (speed, speed)
            if not 0 < low <= high:            # a malformed interval is left out, never drawn
                low = high = speed
            points.append((row, speed, low, high))
        if points:
            series.append({"name": record["solution"], "points": points})
    dtypes = {k[0] for k in keys}
    rows = [f"{d} · {s}" if len(dtypes) > 1 else s for d, s in keys]
    named = {primaries.get(d) for d in dtypes}
    baseline = f"{named.pop()}" if len(named) == 1 else "each dtype's first baseline"
    return {"rows": rows, "series": series, "baseline": baseline}


def roofline_data(records: list[dict], peaks: dict) -> dict:
    """Each timing as a point (FLOP/byte, TFLOP/s), its baselines' points at the same intensity, and the
    ceilings of the dtypes timed.

    {"series": [{"name", "points": [(intensity, tflops)]}], "baselines": {label: [(intensity, tflops)]},
     "compute": {dtype: TFLOP/s}, "copy_gbps": GB/s or None, "derived": bool}
    """
    series, baselines, dtypes = [], {}, set()
    for record in records:
        points = []
        for timing in record.get("timings", []):
            ai, tflops = intensity(timing), number(timing.get("tflops"))
            if ai is None or not tflops or tflops <= 0:
                continue
            points.append((ai, tflops))
            dtypes.add(timing.get("dtype"))
            for label, base in (timing.get("baselines") or {}).items():
                base_tflops = number(base.get("tflops")) if isinstance(base, dict) else None
                if base_tflops and base_tflops > 0:
                    baselines.setdefault(str(label), {}).setdefault((ai, str(timing.get("dtype"))), base_tflops)
        if points:
            series.append({"name": record["solution"], "points": points})
    return {"series": series, "baselines": {k: [(ai, t) for (ai, _), t in v.items()] for k, v in baselines.items()},
            "compute": {d: t for d, t in peaks["tflops"].items() if d in dtypes},
            "copy_gbps": peaks["copy_gbps"], "derived": peaks["derived"]}
