"""Reading Gauntlet's outputs as run documents: results files (`gauntlet run --out`), `gauntlet eval --json` output
and `gauntlet eval-many` lines all become one `gauntlet.run/1` dict, checked before anything is rendered.

Every failure is a ValueError that starts with the file's name and says which field was wrong, so a bad file never
leaves a half-written report behind. Only the fields the report reads are type-checked (the published JSON Schemas in
harness/schemas/ are the full contract; gauntlet.reports.schema validates against them where jsonschema is installed).
"""
from __future__ import annotations

import json
from pathlib import Path

from ..reasons import VERDICTS

# Mirrors of gauntlet.judge.records.results.RUN_SCHEMA / EVAL_SCHEMA. Copied rather than imported so that reading
# results never drags in the judge (and, through it, torch); tests/test_reports.py checks that the copies still match.
# The verdicts are gauntlet.reasons' own: that module imports the standard library only.
RUN_SCHEMA = "gauntlet.run/1"
EVAL_SCHEMA = "gauntlet.eval/1"
MANY_SCHEMA = "gauntlet.many/1"


class BadResults(ValueError):
    """A results file the user gave that cannot be read as one (missing, not JSON, not Gauntlet's output): the
    user's to fix, said with the file's name (gauntlet.cli.main reports it as a usage error)."""


def load_runs(paths: list) -> list[tuple[str, dict]]:
    """Read and validate every file up front, so an error names its file before any output is produced."""
    if not paths:
        raise BadResults("no results files given")
    return [(str(p), read_run(Path(p))) for p in paths]


def read_run(path: Path) -> dict:
    """Parse one results file; every failure becomes a BadResults that starts with the file's path."""
    if not path.exists():
        raise BadResults(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadResults(f"{path}: cannot read: {exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = _json_lines(text)
        if lines is None:
            raise BadResults(f"{path}: not JSON: {exc}") from exc
        doc = _as_run(lines, str(path))
    else:
        if isinstance(doc, dict) and doc.get("schema") == EVAL_SCHEMA:
            doc = _as_run([doc], str(path))
    return validate_run(doc, str(path))


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
            raise BadResults(f"{name}: line {i + 1} is not gauntlet output (schema {EVAL_SCHEMA!r} or {MANY_SCHEMA!r})")
        if "summary" in doc:
            run["environment"] = doc["summary"].get("environment") or run["environment"]
            continue
        if doc.get("verdict") == "usage_error":
            raise BadResults(f"{name}: a usage error, not a judgement: {doc.get('error')}")
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
        raise BadResults(f"{name}: expected a JSON object with schema {RUN_SCHEMA!r}, got {type(doc).__name__}")
    if doc.get("schema") != RUN_SCHEMA:
        raise BadResults(f"{name}: schema is {doc.get('schema')!r}, expected {RUN_SCHEMA!r}")
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
        raise BadResults(f"{name}: {where}.schema is {record.get('schema')!r}, expected {EVAL_SCHEMA!r}")
    for key in ("problem", "solution", "verdict"):
        if not isinstance(record.get(key), str) or not record.get(key):
            raise BadResults(f"{name}: {where}.{key} is missing or not a string")
    if record["verdict"] not in VERDICTS:
        raise BadResults(f"{name}: {where}.verdict is {record['verdict']!r}, expected one of {', '.join(VERDICTS)}")
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
    """Return value if it is a `kind`, else raise the BadResults every schema problem is reported as."""
    if not isinstance(value, kind):
        raise BadResults(f"{name}: {where} should be a {'JSON object' if kind is dict else 'JSON array'}, "
                         f"got {type(value).__name__}")
    return value
