"""The pytest plugin's results file and regression gate (`--gauntlet-out`, `--gauntlet-compare`).

The plugin judges one problem x solution x dtype per test item, so a session holds one record per dtype. Written out,
they are merged into one record per problem, solution and device, the shape `gauntlet run` writes, so that `gauntlet
report` and `gauntlet compare` read a session's file as they read a run's. The gate compares that same merged document
with a stored one through gauntlet.reports.compare (the comparison `gauntlet compare` makes): a CI job can keep main's
file and judge a branch against it in the same pytest command.

Records reach the controller through each item's report (`user_properties`), so under pytest-xdist the workers'
records arrive here too; the merge and the comparison run once, in the controller.
"""
from __future__ import annotations

import copy
import tempfile
from pathlib import Path

from . import results

# The merged verdict is the worst of its dtypes' verdicts, in this order: a failure anywhere is the record's.
WORST_FIRST = ("fail", "error", "timeout", "interrupted", "unsupported", "pass")


class GateError(ValueError):
    """A stored results file that cannot be compared with (the user's error)."""


def merge(records: list[dict]) -> list[dict]:
    """One record per problem/solution@device from per-dtype records, in key order."""
    groups: dict[str, list[dict]] = {}
    for rec in records:
        groups.setdefault(f"{rec.get('problem')}/{rec.get('solution')}@{rec.get('device')}", []).append(rec)
    return [_merge_group(groups[key]) for key in sorted(groups)]


def _merge_group(recs: list[dict]) -> dict:
    out = copy.deepcopy(recs[0])
    if len(recs) == 1:
        return out
    rank = {v: i for i, v in enumerate(WORST_FIRST)}
    out["verdict"] = min((r.get("verdict") for r in recs), key=lambda v: rank.get(v, -1))
    out["reasons"] = [reason for r in recs for reason in r.get("reasons") or []]
    out["timings"] = [t for r in recs for t in r.get("timings") or []]
    for part in ("cases", "skipped", "score"):
        out[part] = {k: v for r in recs for k, v in (r.get(part) or {}).items()}
    out["static_notes"] = list(dict.fromkeys(n for r in recs for n in r.get("static_notes") or []))
    out["environment_modified"] = sorted({m for r in recs for m in r.get("environment_modified") or []})
    out["elapsed_s"] = round(sum(r.get("elapsed_s") or 0.0 for r in recs), 3)
    seeds = {r.get("seed") for r in recs}
    out["seed"] = seeds.pop() if len(seeds) == 1 else None
    # The dtypes judged, together: a session judging the same selection again has the same settings.
    options = (out.get("fingerprint") or {}).get("options")
    if isinstance(options, dict):
        dtypes = sorted({d for r in recs for d in ((r.get("fingerprint") or {}).get("options") or {}).get("dtypes")
                         or ()})
        options["dtypes"] = dtypes or None
    return out


def write(path: Path, records: list[dict]) -> Path:
    """The session's records, merged, as a `gauntlet.run/1` results file (written atomically)."""
    merged = merge(records)
    device = merged[0].get("device", "cpu") if merged else "cpu"
    out = results.ResultsFile(Path(path), results.environment(device), resume=False)
    out.doc["records"] = merged
    out.save()
    return out.path


def load_base(path: Path):
    """The stored results, read once at the start of the session, so a bad file stops it before anything is judged."""
    from ...reports import compare
    try:
        return compare.load(Path(path))
    except compare.CompareError as exc:
        raise GateError(str(exc)) from None


def check(base, base_name: str, records: list[dict], threshold_pct: float, out_path: Path | None) -> dict:
    """Compare this session's records with the stored ones. Returns the comparison (gauntlet.reports.compare's document)
    with its Markdown under "markdown"; "regressions" empty means the gate is open."""
    from ...reports import compare
    if not records:
        return {"regressions": [], "markdown": f"## gauntlet compare: `{base_name}` -> this session\n\n"
                                              f"No records were judged in this session: nothing to compare.\n"}
    with tempfile.TemporaryDirectory(prefix="gauntlet-gate-") as tmp:
        path = Path(out_path) if out_path else write(Path(tmp) / "session.json", records)
        doc = compare.compare(base, compare.load(path), threshold_pct)
    doc["markdown"] = compare.markdown(doc, (base_name, str(out_path) if out_path else "this session"))
    return doc
