"""Many candidates of one problem in one trusted judge process (`gauntlet eval-many`), for searches that judge
AI-generated kernels by the thousand.

Each candidate is judged exactly as `gauntlet eval` judges it (harness.judge.evaluate: a fresh confined worker of
its own, a fresh baseline worker, the same checks, the same timing), one after another, so no candidate's process,
CUDA context or sticky error ever meets another's. What is shared is only what no candidate can touch: this
process (its interpreter start-up and imports, several seconds per `gauntlet eval`), the verified interpreter and
the device's ceilings, measured once before the first candidate runs.

Candidates come from `.py` files, folders (their `*.py`, sorted by name), JSON-lines files and standard input
(`-`); a JSON line is {"path": FILE} or {"id": NAME, "source": PYTHON TEXT}, and a plain line of standard input
is a path. Inline sources are written into a private folder of this process (mode 0700), as `ID.py`.

Output: one JSON line per candidate as it finishes (the eval record, plus `index`, `id`, `source`, and the schema
`gauntlet.many/1`), then one summary line ({"summary": ...}: counts by verdict, candidates per hour). With an
output file, the lines are appended to it too, and a candidate already judged there with the same fingerprint
(its source's hash, the problem, the harness, the interpreter and the options: harness.judge.fingerprint) is not
judged again: its old line is repeated, marked `resumed`, so a stopped search picks up where it was.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.discover import UsageError

SCHEMA = "gauntlet.many/1"


@dataclass(frozen=True)
class Candidate:
    id: str
    path: Path


def collect(items: list[str], stdin=None) -> list[Candidate]:
    """Every candidate the arguments name, in order. UsageError for what cannot be read (the user's error), before
    anything is judged; two candidates may share a file (each is judged), never an id."""
    out: list[Candidate] = []
    inline_dir: list[Path] = []
    for item in items:
        if item == "-":
            if stdin is None:
                raise UsageError("'-' names standard input, which is not readable here")
            out += _lines(stdin.read().splitlines(), "standard input", inline_dir)
            continue
        path = Path(item)
        if path.is_dir():
            files = sorted(p for p in path.glob("*.py") if p.is_file() and not p.name.startswith("."))
            if not files:
                raise UsageError(f"no candidate files (*.py) in folder {item}")
            out += [Candidate(_id_of(p), p.resolve()) for p in files]
        elif path.suffix in (".jsonl", ".json") and path.is_file():
            out += _lines(path.read_text().splitlines(), str(path), inline_dir)
        elif path.suffix == ".py" and path.is_file():
            out.append(Candidate(_id_of(path), path.resolve()))
        else:
            raise UsageError(f"not a candidate file, folder or JSON-lines file: {item}")
    if not out:
        raise UsageError("no candidates given")
    seen: dict[str, int] = {}
    unique = []
    for c in out:                       # ids name lines of the output: make repeats distinct (a, a#2, ...)
        n = seen[c.id] = seen.get(c.id, 0) + 1
        unique.append(c if n == 1 else Candidate(f"{c.id}#{n}", c.path))
    return unique


def _id_of(path: Path) -> str:
    return path.stem


def _lines(lines: list[str], where: str, inline_dir: list[Path]) -> list[Candidate]:
    out = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith("{"):
            path = Path(line)
            if not path.is_file():
                raise UsageError(f"{where}, line {n}: no such candidate file: {line}")
            out.append(Candidate(_id_of(path), path.resolve()))
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}, line {n}: not JSON: {exc}") from None
        if isinstance(doc.get("path"), str):
            path = Path(doc["path"])
            if not path.is_file():
                raise UsageError(f"{where}, line {n}: no such candidate file: {doc['path']}")
            out.append(Candidate(str(doc.get("id") or _id_of(path)), path.resolve()))
        elif isinstance(doc.get("source"), str) and isinstance(doc.get("id"), str) and doc["id"]:
            if not inline_dir:
                folder = tempfile.mkdtemp(prefix="gauntlet-many-")      # 0700: this user only
                atexit.register(shutil.rmtree, folder, True)            # gone when the judge process ends
                inline_dir.append(Path(folder))
            name = re.sub(r"[^A-Za-z0-9_]", "_", doc["id"])[:80] or "candidate"
            path = inline_dir[0] / f"{name}_{len(out)}.py"
            path.write_text(doc["source"])
            out.append(Candidate(doc["id"], path))
        else:
            raise UsageError(f"{where}, line {n}: a line is {{\"path\": FILE}} or {{\"id\": NAME, \"source\": TEXT}}")
    return out


class Lines:
    """Where the lines go: standard output always, and the output file (appended, one line per write, flushed)
    when one is named. `previous` reads what the file already holds, by fingerprint."""

    def __init__(self, stdout, out_path: Path | None):
        self.stdout, self.out_path = stdout, out_path
        self.previous: dict[str, dict] = {}
        if out_path is not None and out_path.exists():
            for raw in out_path.read_text().splitlines():
                try:
                    doc = json.loads(raw)
                except json.JSONDecodeError:
                    continue             # a line cut by a kill: it was never finished, judge the candidate again
                if isinstance(doc, dict) and doc.get("schema") == SCHEMA and isinstance(doc.get("fingerprint"), dict):
                    self.previous[_key(doc["fingerprint"])] = doc

    def write(self, doc: dict) -> None:
        """Whole lines only: a stop (harness.judge.interrupt) waits until the line is out on both sides."""
        from harness.judge import interrupt
        with interrupt.held():
            self._write(json.dumps(doc, default=str) + "\n")

    def _write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()
        if self.out_path is not None:
            with open(self.out_path, "a") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())


def _key(fp: dict) -> str:
    return json.dumps(fp, sort_keys=True, default=str)


class Run:
    """One eval-many run's state: what has been judged, so a stop can still say it (the summary line)."""

    def __init__(self, total: int, device: str, environment: dict | None = None):
        self.total, self.device, self.environment = total, device, environment or {}
        self.counts: dict[str, int] = {}
        self.tally = {"judged": 0, "resumed": 0}
        self.t0 = time.monotonic()

    def summary(self, stopped: str | None = None) -> dict:
        """The last line: counts by verdict, how many were judged now and how many resumed, and the rate
        (candidates judged in this run per hour of wall time; on cuda, per GPU: one GPU is used)."""
        elapsed = time.monotonic() - self.t0
        rate = self.tally["judged"] / elapsed * 3600 if elapsed > 0 and self.tally["judged"] else None
        out = {"candidates": self.total, "verdicts": dict(self.counts), **self.tally, "elapsed_s": round(elapsed, 1),
               "device": self.device, "per_hour" + ("_per_gpu" if self.device == "cuda" else ""):
                   round(rate, 1) if rate else None}
        if stopped:
            out["interrupted"] = stopped
        out["environment"] = self.environment       # the machine (GPU, driver, versions): what compare checks
        return {"schema": SCHEMA, "summary": out}


def judge_all(problem, candidates: list[Candidate], opts, lines: Lines, judge_one, run: Run, progress=None,
              fmt: str | None = None, backend: str | None = None) -> None:
    """Judge each candidate (judge_one(problem, solution, opts) -> EvalRecord) and write its line as it finishes;
    `run` keeps the tally. `progress(i, n, text)` is told about each candidate. `fmt` and `backend`: --format and
    --backend (harness.formats); each file's format is otherwise found from its own names, so a batch may mix
    native, KernelBench and GPU MODE files. A KernelBench file on a problem with no KernelBench mapping is its
    own `unsupported` line (harness.judge.evaluate), not the end of the batch."""
    from harness import discover
    from harness.judge.fingerprint import fingerprint
    for i, cand in enumerate(candidates):
        try:
            solution = discover.get_solution(problem.id, str(cand.path), fmt=fmt, backend=backend)
        except UsageError as exc:        # gone since it was listed: this candidate's line says so, the rest go on
            _write(lines, run, progress, len(candidates),
                   {"schema": SCHEMA, "problem": problem.id, "solution": cand.id, "path": str(cand.path),
                    "backend": None, "device": opts.device, "verdict": "error", "cases": {}, "timings": [],
                    "reasons": [{"code": "import_error", "detail": str(exc), "repro": ""}],
                    "index": i, "id": cand.id, "source": str(cand.path), "resumed": False, "wall_s": 0.0})
            continue
        fp = fingerprint(problem, solution, opts)
        old = lines.previous.get(_key(fp))
        if old is not None:
            doc = dict(old, index=i, id=cand.id, source=str(cand.path), resumed=True)
        else:
            started = time.monotonic()
            record = judge_one(problem, solution, opts)
            doc = dict(record.to_json(), schema=SCHEMA, index=i, id=cand.id, source=str(cand.path), resumed=False,
                       wall_s=round(time.monotonic() - started, 2))
        if not doc["resumed"]:
            lines.previous[_key(fp)] = doc        # the same source again later in this run: judged once
        _write(lines, run, progress, len(candidates), doc)


def _write(lines: Lines, run: Run, progress, total: int, doc: dict) -> None:
    lines.write(doc)
    run.tally["resumed" if doc["resumed"] else "judged"] += 1
    run.counts[doc["verdict"]] = run.counts.get(doc["verdict"], 0) + 1
    if progress is not None:
        codes = ",".join(sorted({r["code"] for r in doc.get("reasons", [])}))
        progress(doc["index"] + 1, total, f"{doc['id']}: {doc['verdict']}" + (f" ({codes})" if codes else "")
                 + (" (resumed)" if doc["resumed"] else f" in {doc['wall_s']:.1f}s"))
