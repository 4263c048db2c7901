"""Did this change make a kernel slower or wrong? Two runs compared, for a CI log, a PR comment or a script.

Inputs: results files (`gauntlet run`), `gauntlet eval --json` output, or `gauntlet eval-many` lines (read by
gauntlet.reports.load.read_run, as the leaderboard reads them); records are
matched by problem, solution (or eval-many id) and device, then timings by dtype, shape and baseline.

What is compared is each timing's speedup over its baseline, measured in the same run (the paired, drift-cancelling
figure of gauntlet.judge.timing.bench), not raw milliseconds: two CI runs on a shared runner differ in clocks and
neighbours, and the baseline carries that difference with it. The change in time is speedup_base / speedup_new - 1
(positive: slower). Its 95% interval combines the two runs' own intervals on the log scale (each is a paired
bootstrap, so its half-width over 1.96 is that run's standard error). A slowdown is a regression only when the
interval says it is real (its whole interval is on the slow side of no change) and its estimate exceeds the
threshold (--fail-on, percent). A verdict that was `pass` and is anything else is always a regression; a record
judged under other settings (options, the problem's files) or on another device is reported as incomparable,
never compared.

A row is `host_bound` where, in either run, every timed call of the candidate left the GPU idle waiting for its host
(`starved_calls` all of them: a sync inside the call, a Python loop of launches). Such a figure reads the host's
speed as much as the kernel's, so it moves with what else the host runs (other judges: `--gpus`, `--overlap`), even
timed with the host to its judge alone, where GPU-bound figures hold (docs/benchmarks.md, "Two GPUs of one host").
It is still a regression when it is one (a real slowdown looks the same); the row says why it may not be the
kernel's.

Data in, text out: no torch. Details came from untrusted candidates: Markdown cells are escaped.
"""
from __future__ import annotations

import math
from pathlib import Path

from .load import read_run

SCHEMA = "gauntlet.compare/1"
Z95 = 1.959964


class CompareError(ValueError):
    """An input that cannot be read as Gauntlet results (the user's error)."""


def load(path: Path) -> tuple[dict, dict]:
    """(environment, {key: record}) from a results file, an eval JSON object or eval-many lines, read as the
    leaderboard reads them (gauntlet.reports.load.read_run: eval-many records carry their id as the solution)."""
    path = Path(path)
    if not path.is_file():
        raise CompareError(f"{path}: cannot be read: no such file")
    try:
        run = read_run(path)
    except ValueError as exc:
        raise CompareError(str(exc)) from None
    return records_of(str(path), run)


def records_of(name: str, run: dict) -> tuple[dict, dict]:
    """(environment, {key: record}) from an already-read run document (`gauntlet report --compare` has one)."""
    records = {_key(rec): rec for rec in run["records"]}
    if not records:
        raise CompareError(f"{name}: holds no records")
    return run.get("environment") or {}, records


def _key(rec: dict) -> str:
    return f"{rec.get('problem')}/{rec.get('solution')}@{rec.get('device')}"


def compare(base: tuple[dict, dict], new: tuple[dict, dict], threshold_pct: float = 5.0) -> dict:
    """The comparison as one JSON-able document: rows (one per timing compared), regressions, incomparable and
    missing records."""
    (env_a, recs_a), (env_b, recs_b) = base, new
    out = {"schema": SCHEMA, "threshold_pct": threshold_pct, "rows": [], "regressions": [], "incomparable": [],
           "missing": sorted(set(recs_a) - set(recs_b)), "added": sorted(set(recs_b) - set(recs_a)),
           "devices": [env_a.get("gpu") or env_a.get("cpu"), env_b.get("gpu") or env_b.get("cpu")]}
    gpu_a, gpu_b = env_a.get("gpu"), env_b.get("gpu")
    for key in sorted(set(recs_a) & set(recs_b)):
        a, b = recs_a[key], recs_b[key]
        why = _incomparable(a, b, gpu_a, gpu_b)
        if why:
            out["incomparable"].append({"key": key, "why": why})
            continue
        if a.get("verdict") == "pass" and b.get("verdict") != "pass":
            codes = sorted({r.get("code") for r in b.get("reasons") or []})
            out["regressions"].append({"key": key, "kind": "verdict", "was": "pass", "now": b.get("verdict"),
                                       "codes": codes})
        for row in _timing_rows(key, a, b, threshold_pct):
            out["rows"].append(row)
            if row["slower"]:
                out["regressions"].append({"key": key, "kind": "slower", **{k: row[k] for k in
                                           ("dtype", "shape", "baseline", "change_pct", "ci95_pct")}})
    return out


def _incomparable(a: dict, b: dict, gpu_a, gpu_b) -> str | None:
    if a.get("device") == "cuda" and gpu_a and gpu_b and gpu_a != gpu_b:
        return f"different GPUs: {gpu_a} and {gpu_b}"
    fa, fb = a.get("fingerprint") or {}, b.get("fingerprint") or {}
    oa, ob = dict(fa.get("options") or {}), dict(fb.get("options") or {})
    for o in (oa, ob):
        o.pop("seed", None)          # a fresh seed per run is the default: not a different setting
    if oa and ob and oa != ob:
        return "different settings: " + ", ".join(sorted(k for k in set(oa) | set(ob) if oa.get(k) != ob.get(k)))
    if fa.get("problem") and fb.get("problem") and fa["problem"] != fb["problem"]:
        return "the problem's files changed"
    return None


def _timing_rows(key: str, a: dict, b: dict, threshold_pct: float) -> list[dict]:
    index = {(t.get("dtype"), _shape(t.get("shape"))): t for t in a.get("timings") or []}
    rows = []
    for tb in b.get("timings") or []:
        ta = index.get((tb.get("dtype"), _shape(tb.get("shape"))))
        if ta is None:
            continue
        for label, sb in sorted((tb.get("baselines") or {}).items()):
            sa = (ta.get("baselines") or {}).get(label)
            if not _usable(sa) or not _usable(sb):
                continue
            ratio = sb["speedup"] / sa["speedup"]            # < 1: the candidate lost ground on its baseline
            sigma = math.hypot(_log_se(sa), _log_se(sb))
            lo, hi = ratio * math.exp(-Z95 * sigma), ratio * math.exp(Z95 * sigma)
            change = 1 / ratio - 1                          # in time, relative to the baseline: > 0 is slower
            ci = [1 / hi - 1, 1 / lo - 1]
            rows.append({"key": key, "dtype": tb.get("dtype"), "shape": _shape(tb.get("shape")), "baseline": label,
                         "speedup": [sa["speedup"], sb["speedup"]],
                         "candidate_ms": [ta.get("candidate_ms"), tb.get("candidate_ms")],
                         "change_pct": round(100 * change, 2),
                         "ci95_pct": [round(100 * ci[0], 2), round(100 * ci[1], 2)],
                         "slower": ci[0] > 0 and 100 * change > threshold_pct,
                         "faster": ci[1] < 0 and -100 * change > threshold_pct,
                         "host_bound": _host_bound(ta) or _host_bound(tb)})
    return rows


def _host_bound(timing: dict) -> bool:
    """Every timed call of the candidate starved (gauntlet.judge.timing.starved): the GPU waited for its host."""
    starved = timing.get("starved_calls")
    return isinstance(starved, list) and len(starved) == 2 and all(isinstance(x, int) for x in starved) \
        and starved[1] > 0 and starved[0] == starved[1]


def _usable(side) -> bool:
    return isinstance(side, dict) and isinstance(side.get("speedup"), (int, float)) and side["speedup"] > 0


def _log_se(side: dict) -> float:
    """A run's standard error of log(speedup), from its 95% interval (0 when it has none)."""
    ci = side.get("ci95")
    if isinstance(ci, list) and len(ci) == 2 and all(isinstance(x, (int, float)) and x > 0 for x in ci) \
            and ci[0] <= ci[1]:
        return (math.log(ci[1]) - math.log(ci[0])) / (2 * Z95)
    return 0.0


def _shape(shape) -> str:
    if isinstance(shape, dict):
        return ",".join(f"{k}={v}" for k, v in shape.items())
    return str(shape)


def markdown(doc: dict, names: tuple[str, str]) -> str:
    """For a CI log or a PR comment."""
    regressions = doc["regressions"]
    head = (f"## gauntlet compare: `{_cell(names[0])}` -> `{_cell(names[1])}`\n\n"
            f"{len(doc['rows'])} timings compared (threshold {doc['threshold_pct']:g}%), "
            f"**{len(regressions)} regression(s)**, {sum(r['faster'] for r in doc['rows'])} faster, "
            f"{len(doc['incomparable'])} incomparable, {len(doc['missing'])} missing from the new run.\n")
    lines = [head]
    verdicts = [r for r in regressions if r["kind"] == "verdict"]
    if verdicts:
        lines += ["### Verdicts that were pass\n", "| record | now | codes |", "|---|---|---|"]
        lines += [f"| {_cell(r['key'])} | {_cell(r['now'])} | {_cell(', '.join(r['codes']))} |" for r in verdicts]
        lines.append("")
    if doc["rows"]:
        lines += ["### Times (relative to each run's own baseline)\n",
                  "| record | dtype | shape | vs | speedup before -> after | time change | 95% interval | |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in sorted(doc["rows"], key=lambda r: -r["change_pct"]):
            flag = "**slower**" if r["slower"] else ("faster" if r["faster"] else "")
            flag += " (host-bound)" if r.get("host_bound") else ""
            lines.append(f"| {_cell(r['key'])} | {_cell(r['dtype'])} | {_cell(r['shape'])} | {_cell(r['baseline'])} "
                         f"| {r['speedup'][0]:.3f} -> {r['speedup'][1]:.3f} | {r['change_pct']:+.1f}% "
                         f"| [{r['ci95_pct'][0]:+.1f}%, {r['ci95_pct'][1]:+.1f}%] | {flag.strip()} |")
        lines.append("")
        if any(r.get("host_bound") for r in doc["rows"]):
            lines += ["Host-bound: every timed call of the candidate waited for its host (a sync, a loop of "
                      "launches), in one run or both. Its figure reads the host's speed too, and moves with what else "
                      "the host runs (other judges: --gpus, --overlap); compare such rows between runs of the same "
                      "settings on the same machine.", ""]
    if doc["incomparable"]:
        lines += ["### Not compared\n"] + [f"- {_cell(r['key'])}: {_cell(r['why'])}" for r in doc["incomparable"]]
        lines.append("")
    if doc["missing"]:
        lines += ["### Missing from the new run\n"] + [f"- {_cell(k)}" for k in doc["missing"]]
        lines.append("")
    return "\n".join(lines)


def _cell(text) -> str:
    """Untrusted text in a Markdown table cell: no pipes, no line breaks, no HTML, no backticks."""
    s = str(text).replace("\n", " ").replace("|", "\\|").replace("`", "'")
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")[:300]
