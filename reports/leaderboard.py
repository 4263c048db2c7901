"""Leaderboards from results files, as Markdown and as one self-contained HTML page.

Input is one or more `gauntlet.run/1` documents (harness/results.py writes them). Runs are grouped by where they
ran (the GPU's name, or "CPU"), so an H100 run and an H200 run are never ranked against each other; within a
group, a record of the same problem/solution/device in a later file replaces the earlier one, so re-running one
solution and passing both files shows the new result.

Everything here is data in, text out: no torch, no kernels. Details and repro strings were produced while
running untrusted candidates, so they are treated as hostile text: HTML-escaped on the page (which also carries
a Content-Security-Policy that forbids scripts) and fenced as code in the Markdown.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

# Mirrors of harness.judge.results.RUN_SCHEMA / EVAL_SCHEMA and harness.reasons.VERDICTS. Copied rather than imported
# so that reading results never drags in the harness (and, through it, torch); tests/test_reports.py checks that
# the copies still match.
RUN_SCHEMA = "gauntlet.run/1"
EVAL_SCHEMA = "gauntlet.eval/1"
VERDICTS = ("pass", "fail", "error", "timeout", "unsupported", "interrupted")

# Where non-pass records sit below the ranked ones: real failures first (they need attention), "unsupported"
# last (it only says the backend cannot run on this device).
_BOTTOM_ORDER = {"fail": 0, "timeout": 1, "error": 2, "interrupted": 3, "unsupported": 4}
DETAIL_LIMIT = 300
DASH = "—"


# ----------------------------------------------------------------------------------------------- public API

def build(paths: list, out_dir) -> dict:
    """Write out_dir/leaderboard.md and out_dir/leaderboard.html from the given results files.

    Returns {"markdown": Path, "html": Path, "rows": n}, n being the number of leaderboard rows (one per
    solution per problem/dtype table). Raises ValueError naming the file for any unreadable or malformed input,
    before anything is written, so a bad file never leaves a half-updated report behind.
    """
    runs = load_runs(paths)
    report = assemble_report(runs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md_path, html_path = out / "leaderboard.md", out / "leaderboard.html"
    md_path.write_text(render_markdown(report), encoding="utf-8")
    html_path.write_text(render_html(report), encoding="utf-8")
    return {"markdown": md_path, "html": html_path, "rows": sum(len(b.table.rows) for b in report.boards)}


def markdown_table(docs: list) -> str:
    """The leaderboard tables alone (no header, timings or failures), for pasting into notes.

    `docs` are already-loaded run documents; they are validated like files, named docs[i] in errors.
    """
    runs = [(f"docs[{i}]", validate_run(doc, f"docs[{i}]")) for i, doc in enumerate(docs)]
    groups = merge_groups(runs)
    return "\n".join(format_markdown_board(b) for b in make_boards(groups)) or "_No records._\n"


# ------------------------------------------------------------------------------------------ reading & checks

def load_runs(paths: list) -> list[tuple[str, dict]]:
    """Read and validate every file up front, so an error names its file before any output is produced."""
    if not paths:
        raise ValueError("no results files given")
    return [(str(p), read_run(Path(p))) for p in paths]


def read_run(path: Path) -> dict:
    """Parse one results file; every failure becomes a ValueError that starts with the file's path."""
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = _json_lines(text)
        if lines is None:
            raise ValueError(f"{path}: not JSON: {exc}") from exc
        doc = _as_run(lines, str(path))
    else:
        if isinstance(doc, dict) and doc.get("schema") == EVAL_SCHEMA:
            doc = _as_run([doc], str(path))
    return validate_run(doc, str(path))


MANY_SCHEMA = "gauntlet.many/1"


def _json_lines(text: str) -> list | None:
    """The lines of `gauntlet eval-many` output, or None when the text is not JSON lines."""
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return None


def _as_run(docs: list, name: str) -> dict:
    """`gauntlet eval --json` output (one record, with its environment and peaks) or eval-many lines (records, then
    a summary that carries the environment), read as a results file: one leaderboard for every output."""
    run = {"schema": RUN_SCHEMA, "environment": {}, "peaks": {}, "records": []}
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or doc.get("schema") not in (EVAL_SCHEMA, MANY_SCHEMA):
            raise ValueError(f"{name}: line {i + 1} is not gauntlet output (schema {EVAL_SCHEMA!r} or {MANY_SCHEMA!r})")
        if "summary" in doc:
            run["environment"] = doc["summary"].get("environment") or run["environment"]
            continue
        if doc.get("verdict") == "usage_error":
            raise ValueError(f"{name}: a usage error, not a judgement: {doc.get('error')}")
        record = {k: v for k, v in doc.items() if k not in ("environment", "peaks")}
        if doc.get("schema") == MANY_SCHEMA:
            record.update(schema=EVAL_SCHEMA, solution=str(doc.get("id") or doc.get("solution")))
        run["environment"] = doc.get("environment") or run["environment"]
        run["peaks"] = doc.get("peaks") or run["peaks"]
        run["records"].append(record)
    return run


def validate_run(doc, name: str) -> dict:
    """Check the shape of a run document, so rendering can trust types and errors say what was wrong where."""
    if not isinstance(doc, dict):
        raise ValueError(f"{name}: expected a JSON object with schema {RUN_SCHEMA!r}, got {type(doc).__name__}")
    if doc.get("schema") != RUN_SCHEMA:
        raise ValueError(f"{name}: schema is {doc.get('schema')!r}, expected {RUN_SCHEMA!r}")
    expect_type(doc.get("environment", {}), dict, name, "environment")
    expect_type(doc.get("peaks", {}), dict, name, "peaks")
    expect_type(doc.get("interrupted", {}), dict, name, "interrupted")
    records = expect_type(doc.get("records"), list, name, "records")
    for i, record in enumerate(records):
        validate_record(record, name, f"records[{i}]")
    return doc


def validate_record(record, name: str, where: str) -> None:
    """Check one eval record; only the fields the report reads are required to have the right type."""
    expect_type(record, dict, name, where)
    if record.get("schema", EVAL_SCHEMA) != EVAL_SCHEMA:
        raise ValueError(f"{name}: {where}.schema is {record.get('schema')!r}, expected {EVAL_SCHEMA!r}")
    for key in ("problem", "solution", "verdict"):
        if not isinstance(record.get(key), str) or not record.get(key):
            raise ValueError(f"{name}: {where}.{key} is missing or not a string")
    if record["verdict"] not in VERDICTS:
        raise ValueError(f"{name}: {where}.verdict is {record['verdict']!r}, expected one of {', '.join(VERDICTS)}")
    for key, kind in (("reasons", list), ("cases", dict), ("skipped", dict), ("timings", list), ("score", dict)):
        expect_type(record.get(key, kind()), kind, name, f"{where}.{key}")
    for j, reason in enumerate(record.get("reasons", [])):
        expect_type(reason, dict, name, f"{where}.reasons[{j}]")
    for j, timing in enumerate(record.get("timings", [])):
        expect_type(timing, dict, name, f"{where}.timings[{j}]")
        baselines = expect_type(timing.get("baselines", {}), dict, name, f"{where}.timings[{j}].baselines")
        for label, base in baselines.items():
            expect_type(base, dict, name, f"{where}.timings[{j}].baselines.{label}")
    for dtype, per_base in record.get("score", {}).items():
        for label, summary in expect_type(per_base, dict, name, f"{where}.score.{dtype}").items():
            expect_type(summary, dict, name, f"{where}.score.{dtype}.{label}")


def expect_type(value, kind: type, name: str, where: str):
    """Return value if it is a `kind`, else raise the ValueError every schema problem is reported as."""
    if not isinstance(value, kind):
        raise ValueError(f"{name}: {where} should be a {'JSON object' if kind is dict else 'JSON array'}, "
                         f"got {type(value).__name__}")
    return value


# ------------------------------------------------------------------------------------------------ the model

@dataclass
class Group:
    """All records that ran on one kind of machine; ranking happens only inside a group."""
    label: str
    records: dict = field(default_factory=dict)   # (problem, solution, device) -> record


@dataclass
class Table:
    """A renderer-neutral table, so Markdown and HTML show exactly the same numbers."""
    headers: list
    rows: list = field(default_factory=list)
    numeric: frozenset = frozenset()               # column indexes to right-align
    verdict_col: int | None = None
    verdicts: list = field(default_factory=list)   # one per row, to colour the verdict cell


@dataclass
class Board:
    group: str
    problem: str
    dtype: str | None
    table: Table

    @property
    def title(self) -> str:
        return f"{self.group} — {self.problem}" + (f" · {self.dtype}" if self.dtype else "")


@dataclass
class Report:
    generated: str
    runs: list        # [{"file", "label", "environment", "peaks", "created", "updated", "records"}]
    boards: list      # [Board]
    details: list     # [(group label, Table)]
    failures: list    # [(group label, record)]
    settings: list = field(default_factory=list)   # warnings: records of one machine judged under other settings


def assemble_report(runs: list[tuple[str, dict]]) -> Report:
    """Turn validated run documents into everything both renderers need."""
    groups = merge_groups(runs)
    return Report(generated=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  runs=[describe_run(name, doc) for name, doc in runs],
                  boards=make_boards(groups),
                  details=[(g.label, detail_table(g)) for g in groups
                           if any(r.get("timings") for r in g.records.values())],
                  failures=[(g.label, r) for g in groups for r in sorted_records(g) if r["verdict"] != "pass"],
                  settings=[w for g in groups for w in settings_warnings(g)])


def settings_warnings(group: Group) -> list[str]:
    """Records ranked side by side should have been judged alike: say so when the harness or the options differ
    between them, or when a record carries no fingerprint at all (judged by an older Gauntlet)."""
    kinds: dict = {}
    bare = 0
    for record in group.records.values():
        fp = record.get("fingerprint")
        if not isinstance(fp, dict) or not fp:
            bare += 1
            continue
        opts = fp.get("options") if isinstance(fp.get("options"), dict) else {}
        key = (str(fp.get("harness")), json.dumps(opts, sort_keys=True, default=str))
        kinds.setdefault(key, []).append(record)
    out = []
    if len(kinds) > 1:
        harnesses = sorted({k[0] for k in kinds})
        options = [json.loads(k[1]) for k in kinds]
        differing = sorted({name for o in options for name in o if any(o.get(name) != p.get(name) for p in options)})
        out.append(f"{group.label}: records were judged under {len(kinds)} different settings"
                   + (f" (harness versions {', '.join(harnesses)})" if len(harnesses) > 1 else "")
                   + (f" (options differ in: {', '.join(differing)})" if differing else "")
                   + "; compare their figures with care")
    if bare:
        out.append(f"{group.label}: {bare} record(s) carry no fingerprint (judged by an older Gauntlet): their "
                   "settings are unknown")
    return out


def merge_groups(runs: list[tuple[str, dict]]) -> list[Group]:
    """Group records by machine; a later file's record of the same problem/solution/device replaces an earlier one."""
    groups: dict[str, Group] = {}
    for _, doc in runs:
        env = doc.get("environment", {})
        for record in doc["records"]:
            device = str(record.get("device") or env.get("device") or "?")
            label = label_machine(env, device)
            group = groups.setdefault(label, Group(label))
            group.records[(record["problem"], record["solution"], device)] = record
    return list(groups.values())


def label_machine(env: dict, device: str) -> str:
    """The name runs are grouped by: the GPU's name for GPU runs, "CPU" for CPU runs."""
    if device == "cpu":
        return "CPU"
    return str(env.get("gpu") or device.upper())


def sorted_records(group: Group) -> list[dict]:
    return [group.records[k] for k in sorted(group.records)]


def describe_run(name: str, doc: dict) -> dict:
    env = doc.get("environment", {})
    return {"file": name, "label": label_machine(env, str(env.get("device") or "?")),
            "environment": describe_environment(env), "peaks": describe_peaks(doc.get("peaks", {})),
            "created": str(doc.get("created", DASH)), "updated": str(doc.get("updated", DASH)),
            "records": len(doc["records"]), "interrupted": describe_interruption(doc.get("interrupted"))}


def describe_interruption(mark) -> str:
    """The run was stopped before the end (harness.judge.stopped writes the mark): its table is partial."""
    if not mark:
        return ""
    rest = mark.get("not_judged") if isinstance(mark.get("not_judged"), list) else []
    flight = f" while judging {mark['in_flight']}" if mark.get("in_flight") else ""
    return (f"stopped by {mark.get('signal', '?')} at {mark.get('at', '?')}{flight}: partial results, "
            f"{len(rest)} not judged; resume with: {mark.get('resume', 'gauntlet run')}")


def describe_environment(env: dict) -> str:
    """One line with what decides a number's meaning: machine, library versions, and the code's commit."""
    parts = [label_machine(env, str(env.get("device") or "?"))]
    if env.get("cpu"):
        parts.append(str(env["cpu"]))
    if env.get("cpu_count"):
        parts.append(f"{env['cpu_count']} cores")
    if env.get("sm_count"):
        parts.append(f"{env['sm_count']} SMs")
    for key, name in (("driver", "driver"), ("torch", "torch"), ("cuda", "CUDA"), ("triton", "triton"),
                      ("cupy", "cupy"), ("cutlass_dsl", "cutlass-dsl")):
        if env.get(key):
            parts.append(f"{name} {env[key]}")
    if env.get("git_commit"):
        commit = str(env["git_commit"])
        parts.append(f"commit {commit[:12]}{'-dirty' if commit.endswith('-dirty') else ''}")
    if env.get("host"):
        parts.append(f"host {env['host']}")
    return " · ".join(parts)


def describe_peaks(peaks: dict) -> str:
    """Measured peaks, the yardstick behind every "% of peak" figure."""
    parts = []
    for key, value in peaks.items():
        if isinstance(value, dict) and number(value.get("tflops")) is not None:
            parts.append(f"{key} {number(value['tflops']):.1f} TFLOP/s")
        elif key.endswith("_gbps") and number(value) is not None:
            parts.append(f"{key.removesuffix('_gbps')} {number(value):.0f} GB/s")
        else:
            parts.append(f"{key} {value}")
    return ", ".join(parts) or "not measured"


# ---------------------------------------------------------------------------------------------- leaderboards

def make_boards(groups: list[Group]) -> list[Board]:
    """One ranked table per machine, problem and dtype."""
    boards = []
    for group in groups:
        by_problem: dict[str, list] = {}
        for record in sorted_records(group):
            by_problem.setdefault(record["problem"], []).append(record)
        for problem, records in by_problem.items():
            for dtype in list_dtypes(records) or [None]:
                boards.append(Board(group.label, problem, dtype, leaderboard_table(records, dtype)))
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


def leaderboard_table(records: list[dict], dtype: str | None) -> Table:
    """Rows ranked by geomean speedup against the first baseline; non-pass records at the bottom with reasons.

    A record with no per-dtype information at all (an import error, an unsupported backend) is listed under
    every dtype of its problem, so it is never silently missing from a table.
    """
    shown = [r for r in records if dtype is None or dtype in record_dtypes(r) or not record_dtypes(r)]
    labels = list_baselines(shown, dtype)
    primary = labels[0] if labels else None
    against = f" (vs {primary})" if primary and len(labels) > 1 else ""
    headers = (["#", "solution", "backend", "verdict"]
               + ([f"vs {label}" for label in labels] or ["speedup"])
               + [f"fast_1.0{against}", f"fast_1.5{against}", "best TFLOP/s", "cases"])
    table = Table(headers, numeric=frozenset(range(4, len(headers) - 1)) | {0}, verdict_col=3)
    rank = 0
    for record in rank_records(shown, dtype, primary):
        # A rank is earned by a measured speedup: a CPU run (no timing) lists verdicts without a fake order.
        ranked = record["verdict"] == "pass" and bool(scores_of(record, dtype))
        rank += ranked
        table.rows.append(board_row(record, dtype, labels, primary, str(rank) if ranked else DASH))
        table.verdicts.append(record["verdict"])
    return table


def list_baselines(records: list[dict], dtype: str | None) -> list[str]:
    seen: dict[str, None] = {}
    for record in records:
        for label in scores_of(record, dtype):
            seen.setdefault(label, None)
    return list(seen)


def scores_of(record: dict, dtype: str | None) -> dict:
    return record.get("score", {}).get(dtype, {}) if dtype is not None else {}


def rank_records(records: list[dict], dtype: str | None, primary: str | None) -> list[dict]:
    """Correct solutions first, fastest first (unscored ones after scored); then failures, then unsupported."""
    def key(record):
        if record["verdict"] != "pass":
            return (2, _BOTTOM_ORDER.get(record["verdict"], 9), 0.0, 0.0, record["solution"])
        speed = number(scores_of(record, dtype).get(primary, {}).get("geomean_speedup")) if primary else None
        best = best_tflops(record, dtype) or 0.0
        return (0 if speed is not None else 1, -(speed or 0.0), -best, 0, record["solution"])
    return sorted(records, key=key)


def board_row(record: dict, dtype: str | None, labels: list[str], primary: str | None, rank: str) -> list[str]:
    scores = scores_of(record, dtype)
    head = scores.get(primary, {}) if primary else {}
    speeds = [format_speedup(scores.get(label, {}).get("geomean_speedup")) for label in labels] or [DASH]
    return ([rank, record["solution"], str(record.get("backend") or DASH), format_verdict(record)] + speeds
            + [format_percent(head.get("fast_1.0")), format_percent(head.get("fast_1.5")),
               format_number(best_tflops(record, dtype), 1), format_cases(record, dtype)])


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

DETAIL_HEADERS = ["problem", "solution", "dtype", "shape", "source", "candidate ms", "baseline", "baseline ms",
                  "speedup (95% CI)", "TFLOP/s", "% of peak", "mode"]


def detail_table(group: Group) -> Table:
    """One row per timed shape and baseline, so every geomean above can be traced back to its measurements."""
    table = Table(list(DETAIL_HEADERS), numeric=frozenset({5, 7, 8, 9, 10}))
    for record in sorted_records(group):
        order = {d: i for i, d in enumerate(record_dtypes(record))}
        timings = sorted(record.get("timings", []), key=lambda t: order.get(t.get("dtype"), len(order)))
        for timing in timings:
            for label, base in (timing.get("baselines") or {DASH: {}}).items():
                table.rows.append(detail_row(record, timing, label, base))
    return table


def detail_row(record: dict, timing: dict, label: str, base: dict) -> list[str]:
    return [record["problem"], record["solution"], str(timing.get("dtype") or DASH),
            format_shape(timing.get("shape")), str(timing.get("source") or DASH),
            format_ms(timing.get("candidate_ms")), label, format_ms(base.get("ms")),
            format_speedup_ci(base.get("speedup"), base.get("ci95")), format_number(timing.get("tflops"), 1),
            format_peak(timing), str(timing.get("mode") or DASH)]


def format_shape(shape) -> str:
    """Dims in the problem's order joined by "x": {"M": 4096, "N": 4096, "K": 4096} -> 4096x4096x4096."""
    if isinstance(shape, dict):
        return "x".join(str(v) for v in shape.values()) or DASH
    if isinstance(shape, (list, tuple)):
        return "x".join(str(v) for v in shape) or DASH
    return DASH if shape is None else str(shape)


def format_peak(timing: dict) -> str:
    """Share of the measured compute peak; for a kernel with no compute figure, its share of copy bandwidth."""
    if number(timing.get("peak_fraction")) is not None:
        return format_percent(timing["peak_fraction"])
    if number(timing.get("bw_fraction")) is not None:
        return f"{format_percent(timing['bw_fraction'])} BW"
    return DASH


# ----------------------------------------------------------------------------------------------- formatting

def number(value) -> float | None:
    """A finite float, or None for anything else (missing, null, NaN, strings, booleans)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def format_number(value, digits: int) -> str:
    value = number(value)
    return DASH if value is None else f"{value:.{digits}f}"


def format_speedup(value) -> str:
    value = number(value)
    return DASH if value is None else f"{value:.2f}×"


def format_speedup_ci(value, ci) -> str:
    text = format_speedup(value)
    if text != DASH and isinstance(ci, (list, tuple)) and len(ci) == 2 and all(number(c) is not None for c in ci):
        text += f" [{number(ci[0]):.2f}, {number(ci[1]):.2f}]"
    return text


def format_percent(value) -> str:
    value = number(value)
    return DASH if value is None else f"{100 * value:.0f}%"


def format_ms(value) -> str:
    """Milliseconds with about four significant digits, without switching to scientific notation."""
    value = number(value)
    if value is None:
        return DASH
    return f"{value:.1f}" if value >= 100 else f"{value:.3f}" if value >= 1 else f"{value:.4f}"


def truncate(text: str, limit: int = DETAIL_LIMIT) -> str:
    """Cap a candidate-controlled detail: a hostile or chatty candidate must not flood the report."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"


# ------------------------------------------------------------------------------------------------- Markdown

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
    parts += ["", "## Leaderboard", ""]
    parts += [format_markdown_board(b) for b in report.boards] or ["_No records._", ""]
    if report.details:
        parts += ["## Per-shape timings", ""]
        for label, table in report.details:
            parts += [f"### {md_text(label)}", "", format_markdown_table(table)]
    if report.failures:
        parts += ["## Failures", ""]
        parts += [format_markdown_failure(label, record) for label, record in report.failures]
    return "\n".join(parts).rstrip() + "\n"


def format_markdown_board(board: Board) -> str:
    return f"### {md_text(board.title)}\n\n{format_markdown_table(board.table)}"


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


# ----------------------------------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:2rem auto;
     max-width:1400px;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.3rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem;margin-top:2rem}
h3{font-size:1.05rem;margin-top:1.5rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0}
tbody tr:nth-child(even){background:#fafbfc}
td.num,th.num{text-align:right;white-space:nowrap}
td.verdict{font-weight:600;white-space:nowrap}
.v-pass{background:#dafbe1;color:#116329}.v-fail{background:#ffebe9;color:#a40e26}
.v-error{background:#ffd8d3;color:#82071e}.v-timeout{background:#fff1c2;color:#7d4e00}
.v-unsupported{background:#eaeef2;color:#57606a}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.5rem .75rem;overflow-x:auto;white-space:pre-wrap;
    word-break:break-word}
.run{margin:.4rem 0}.muted{color:#57606a}.code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;
     font-weight:600}
.failure{border-left:4px solid #cf222e;padding-left:.8rem;margin:1rem 0}
.failure.unsupported{border-left-color:#8c959f}
"""


def render_html(report: Report) -> str:
    """One page, inline CSS, no scripts; the CSP meta tag forbids scripts even if escaping ever missed one."""
    esc = escape
    body = ["<h1>Gauntlet leaderboard</h1>",
            f"<p class=\"muted\">Generated {esc(report.generated)} from {len(report.runs)} results file(s).</p>",
            "<h2>Runs</h2>"]
    for run in report.runs:
        body.append(f"<div class=\"run\"><strong>{esc(run['file'])}</strong> <span class=\"muted\">"
                    f"({run['records']} records, {esc(run['created'])} → {esc(run['updated'])})</span><br>"
                    f"{esc(run['environment'])}<br><span class=\"muted\">peaks: {esc(run['peaks'])}</span>"
                    + (f"<br><strong>{esc(run['interrupted'])}</strong>" if run["interrupted"] else "") + "</div>")
    if report.settings:
        body.append("<h2>Settings</h2>")
        body += [f"<p class=\"muted\">{esc(w)}</p>" for w in report.settings]
    body.append("<h2>Leaderboard</h2>")
    for board in report.boards:
        body += [f"<h3>{esc(board.title)}</h3>", format_html_table(board.table)]
    if not report.boards:
        body.append("<p><em>No records.</em></p>")
    if report.details:
        body.append("<h2>Per-shape timings</h2>")
        for label, table in report.details:
            body += [f"<h3>{esc(label)}</h3>", format_html_table(table)]
    if report.failures:
        body.append("<h2>Failures</h2>")
        body += [format_html_failure(label, record) for label, record in report.failures]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>Gauntlet leaderboard</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def format_html_table(table: Table) -> str:
    def cell(tag, i, text, verdict=None):
        classes = (["num"] if i in table.numeric else []) + \
                  (["verdict", f"v-{verdict}"] if verdict and i == table.verdict_col else [])
        attr = f" class=\"{escape(' '.join(classes))}\"" if classes else ""
        return f"<{tag}{attr}>{escape(text)}</{tag}>"
    head = "<tr>" + "".join(cell("th", i, h) for i, h in enumerate(table.headers)) + "</tr>"
    rows = []
    for r, row in enumerate(table.rows):
        verdict = table.verdicts[r] if r < len(table.verdicts) else None
        rows.append("<tr>" + "".join(cell("td", i, c, verdict) for i, c in enumerate(row)) + "</tr>")
    return f"<table>\n<thead>{head}</thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"


def format_html_failure(label: str, record: dict) -> str:
    esc = escape
    parts = [f"<section class=\"failure {esc(record['verdict'])}\">",
             f"<h3>{esc(label)} — {esc(record['problem'])} / {esc(record['solution'])}: "
             f"<span class=\"verdict v-{esc(record['verdict'])}\">{esc(record['verdict'])}</span></h3>"]
    for reason in record.get("reasons", []) or [{"code": DASH, "detail": "no reason recorded"}]:
        parts += [f"<p class=\"code\">{esc(reason.get('code', '?'))}</p>",
                  f"<pre>{esc(truncate(reason.get('detail', '')))}</pre>"]
        if reason.get("repro"):
            parts += ["<p>Repro:</p>", f"<pre class=\"repro\">{esc(reason['repro'])}</pre>"]
    parts.append("</section>")
    return "\n".join(parts)


def escape(text) -> str:
    return html.escape(str(text), quote=True)
