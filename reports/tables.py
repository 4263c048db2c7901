"""The leaderboard's tables, renderer-neutral, so the Markdown and the HTML show exactly the same numbers.

A board is one problem's ranking in one dtype on one machine: correct solutions first, fastest first by their
geometric-mean speedup over the problem's first baseline; then failures, then `unsupported` (it only says the
backend cannot run on this device). A detail table has one row per timed shape and baseline, so every geomean can
be traced back to its measurements.

A column in which no row has a number (every speed column of a CPU run, where nothing is timed) is dropped rather
than printed as a column of dashes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .formatting import (DASH, format_ms, format_number, format_percent, format_seconds, format_shape,
                                format_speedup, format_speedup_ci, number)

# Where non-pass records sit below the ranked ones: real failures first (they need attention), "unsupported" last.
BOTTOM_ORDER = {"fail": 0, "timeout": 1, "error": 2, "interrupted": 3, "unsupported": 4}
FAILED = frozenset({"fail", "error", "timeout", "interrupted"})


@dataclass
class Table:
    headers: list
    rows: list = field(default_factory=list)
    numeric: frozenset = frozenset()               # column indexes to right-align
    verdict_col: int | None = None
    verdicts: list = field(default_factory=list)   # one per row, to colour the verdict cell
    solutions: list = field(default_factory=list)  # one per row: the record's solution (the page anchors rows by it)

    def compact(self) -> Table:
        """This table without the columns in which every row is a dash (a table with no rows keeps them all)."""
        if not self.rows:
            return self
        keep = [i for i in range(len(self.headers)) if any(row[i] != DASH for row in self.rows)]
        where = {old: new for new, old in enumerate(keep)}
        return replace(self, headers=[self.headers[i] for i in keep],
                       rows=[[row[i] for i in keep] for row in self.rows],
                       numeric=frozenset(where[i] for i in self.numeric if i in where),
                       verdict_col=where.get(self.verdict_col))


@dataclass
class Board:
    group: str
    problem: str
    dtype: str | None
    table: Table
    primary: str | None                            # the baseline the ranking (and the page's charts) use
    labels: list = field(default_factory=list)     # every baseline the board has a column for, primary first

    @property
    def title(self) -> str:
        return f"{self.group} — {self.problem}" + (f" · {self.dtype}" if self.dtype else "")


def problem_boards(group: str, problem: str, records: list[dict]) -> list[Board]:
    """One ranked table per dtype of the problem."""
    boards = []
    for dtype in list_dtypes(records) or [None]:
        shown = [r for r in records if dtype is None or dtype in record_dtypes(r) or not record_dtypes(r)]
        labels = list_baselines(shown, dtype)
        primary = labels[0] if labels else None
        boards.append(Board(group, problem, dtype, leaderboard_table(shown, dtype, labels), primary, labels))
    return boards


def list_dtypes(records: list[dict]) -> list[str]:
    """Dtypes anything was run or scored in, in first-seen order (which follows the problem's own order)."""
    seen: dict[str, None] = {}
    for record in records:
        for dtype in record_dtypes(record):
            seen.setdefault(dtype, None)
    return list(seen)


def record_dtypes(record: dict) -> list[str]:
    names = list(record.get("cases", {})) + list(record.get("score", {}))
    names += [str(t["dtype"]) for t in record.get("timings", []) if t.get("dtype")]
    return list(dict.fromkeys(names))


def list_baselines(records: list[dict], dtype: str | None) -> list[str]:
    seen: dict[str, None] = {}
    for record in records:
        for label in scores_of(record, dtype):
            seen.setdefault(label, None)
    return list(seen)


def scores_of(record: dict, dtype: str | None) -> dict:
    return record.get("score", {}).get(dtype, {}) if dtype is not None else {}


def geomean(record: dict, dtype: str | None, baseline: str | None) -> float | None:
    return number(scores_of(record, dtype).get(baseline, {}).get("geomean_speedup")) if baseline else None


def leaderboard_table(records: list[dict], dtype: str | None, labels: list[str]) -> Table:
    """Rows ranked by geomean speedup against the first baseline; non-pass records at the bottom with reasons.

    A record with no per-dtype information at all (an import error, an unsupported backend) is listed under
    every dtype of its problem, so it is never silently missing from a table.
    """
    primary = labels[0] if labels else None
    against = f" (vs {primary})" if primary and len(labels) > 1 else ""
    headers = (["#", "solution", "backend", "verdict"]
               + ([f"vs {label}" for label in labels] or ["speedup"])
               + [f"fast_1.0{against}", f"fast_1.5{against}", "best TFLOP/s", "cases", "judged in"])
    table = Table(headers, numeric=frozenset(range(4, len(headers) - 2)) | {0, len(headers) - 1}, verdict_col=3)
    rank = 0
    for record in rank_records(records, dtype, primary):
        # A rank is earned by a measured speedup: a CPU run (no timing) lists verdicts without a fake order.
        ranked = record["verdict"] == "pass" and bool(scores_of(record, dtype))
        rank += ranked
        table.rows.append(board_row(record, dtype, labels, primary, str(rank) if ranked else DASH))
        table.verdicts.append(record["verdict"])
        table.solutions.append(record["solution"])
    return table


def rank_records(records: list[dict], dtype: str | None, primary: str | None) -> list[dict]:
    """Correct solutions first, fastest first (unscored ones after scored); then failures, then unsupported."""
    def key(record):
        if record["verdict"] != "pass":
            return (2, BOTTOM_ORDER.get(record["verdict"], 9), 0.0, 0.0, record["solution"])
        speed = geomean(record, dtype, primary)
        best = best_tflops(record, dtype) or 0.0
        return (0 if speed is not None else 1, -(speed or 0.0), -best, 0, record["solution"])
    return sorted(records, key=key)


def board_row(record: dict, dtype: str | None, labels: list[str], primary: str | None, rank: str) -> list[str]:
    scores = scores_of(record, dtype)
    head = scores.get(primary, {}) if primary else {}
    speeds = [format_speedup(scores.get(label, {}).get("geomean_speedup")) for label in labels] or [DASH]
    return ([rank, record["solution"], str(record.get("backend") or DASH), format_verdict(record)] + speeds
            + [format_percent(head.get("fast_1.0")), format_percent(head.get("fast_1.5")),
               format_number(best_tflops(record, dtype), 1), format_cases(record, dtype),
               format_seconds(record.get("elapsed_s"))])


def best_tflops(record: dict, dtype: str | None) -> float | None:
    values = [number(t.get("tflops")) for t in record.get("timings", []) if t.get("dtype") == dtype]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def format_verdict(record: dict) -> str:
    """The verdict, with the reason codes of a non-pass one: "fail (mismatch, input_mutated)"."""
    if record["verdict"] == "pass":
        return "pass"
    codes = list(dict.fromkeys(str(r.get("code", "?")) for r in record.get("reasons", [])))
    return f"{record['verdict']} ({', '.join(codes)})" if codes else record["verdict"]


def format_cases(record: dict, dtype: str | None) -> str:
    """How much checking stands behind the verdict: examples and calls, and the dtype's status if not pass."""
    case = record.get("cases", {}).get(dtype) if dtype is not None else None
    if isinstance(case, dict):
        text = f"{case.get('examples', '?')} ex / {case.get('calls', '?')} calls"
        status = case.get("status")
        return text if status in (None, "pass") else f"{text} ({status})"
    if dtype is not None and dtype in record.get("skipped", {}):
        return "skipped"
    return DASH


# --------------------------------------------------------------------------------------------- detail table

DETAIL_HEADERS = ["solution", "dtype", "shape", "source", "candidate ms", "baseline", "baseline ms",
                  "speedup (95% CI)", "TFLOP/s", "FLOP/byte", "% of peak", "mode"]


def detail_table(records: list[dict]) -> Table:
    """One row per timed shape and baseline of one problem's records."""
    table = Table(list(DETAIL_HEADERS), numeric=frozenset({4, 6, 7, 8, 9, 10}))
    for record in records:
        order = {d: i for i, d in enumerate(record_dtypes(record))}
        timings = sorted(record.get("timings", []), key=lambda t: order.get(t.get("dtype"), len(order)))
        for timing in timings:
            for label, base in (timing.get("baselines") or {DASH: {}}).items():
                table.rows.append(detail_row(record, timing, label, base))
                table.solutions.append(record["solution"])
    return table


def detail_row(record: dict, timing: dict, label: str, base: dict) -> list[str]:
    return [record["solution"], str(timing.get("dtype") or DASH), format_shape(timing.get("shape")),
            str(timing.get("source") or DASH), format_ms(timing.get("candidate_ms")), label, format_ms(base.get("ms")),
            format_speedup_ci(base.get("speedup"), base.get("ci95")), format_number(timing.get("tflops"), 1),
            format_number(intensity(timing), 1), format_peak(timing), str(timing.get("mode") or DASH)]


def intensity(timing: dict) -> float | None:
    """Arithmetic intensity in FLOP/byte: the record's TFLOP/s and GB/s are the problem's `flops` and `bytes`
    formulas over the same time, so their ratio is the formulas' ratio for this shape."""
    tflops, gbps = number(timing.get("tflops")), number(timing.get("gbps"))
    return 1e3 * tflops / gbps if tflops and gbps and tflops > 0 and gbps > 0 else None


def format_peak(timing: dict) -> str:
    """Share of the measured compute peak; for a kernel with no compute figure, its share of copy bandwidth."""
    if number(timing.get("peak_fraction")) is not None:
        return format_percent(timing["peak_fraction"])
    if number(timing.get("bw_fraction")) is not None:
        return f"{format_percent(timing['bw_fraction'])} BW"
    return DASH
