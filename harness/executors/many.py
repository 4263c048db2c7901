"""Many candidates of one problem in one trusted judge process (`gauntlet eval-many`), for searches that judge
AI-generated kernels by the thousand.

Each candidate is judged exactly as `gauntlet eval` judges it (gauntlet.judge.evaluate: a fresh confined worker of
its own, a fresh baseline worker, the same checks, the same timing), one after another, so no candidate's process,
CUDA context or sticky error ever meets another's. What is shared is only what no candidate can touch: this
process (its interpreter start-up and imports, several seconds per `gauntlet eval`), the verified interpreter and
the device's ceilings, measured once before the first candidate runs.

Candidates come from `.py` files, folders (their `*.py`, sorted by name), JSON-lines files and standard input
(`-`); a JSON line is {"path": FILE} or {"id": NAME, "source": PYTHON TEXT}, and a plain line of standard input
is a path. Inline sources are written into a private folder of this process (mode 0700), as `ID.py`.

Output: one JSON line per candidate as it finishes (the eval record, plus `index`, `id`, `source`, and the schema
`gauntlet.many/1`), then one summary line ({"summary": ...}: counts by verdict, candidates per hour). With an output
file, the lines are appended to it too, and a candidate already judged there with the same fingerprint (its source's
hash, the problem, the harness, the interpreter and the options: gauntlet.judge.records.fingerprint) is not judged
again: its old line is repeated, marked `resumed`, so a stopped search picks up where it was.
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

from ..discover import UsageError

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
        """Whole lines only: a stop (gauntlet.judge.records.interrupt) waits until the line is out on both sides."""
        from ..judge.records import interrupt
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

    def __init__(self, total: int, device: str, environment: dict | None = None, gpus: int = 1,
                 executor: str = "inline"):
        self.total, self.device, self.environment = total, device, environment or {}
        self.gpus, self.executor = max(1, gpus), executor
        self.counts: dict[str, int] = {}
        self.tally = {"judged": 0, "resumed": 0}
        self.timed: list = []             # the judged lines' timing entries (their `alone` spans), for the summary
        self.stages: dict = {}            # seconds per stage over the judged lines (gauntlet.judge.records.results)
        self.t0 = time.monotonic()

    def summary(self, stopped: str | None = None) -> dict:
        """The last line: counts by verdict, how many were judged now and how many resumed, and the rate
        (candidates judged in this run per hour of wall time; on cuda, per GPU: divided by the GPUs judging)."""
        elapsed = time.monotonic() - self.t0
        rate = self.tally["judged"] / elapsed * 3600 if elapsed > 0 and self.tally["judged"] else None
        if rate and self.device == "cuda":
            rate /= self.gpus
        out = {"candidates": self.total, "verdicts": dict(self.counts), **self.tally, "elapsed_s": round(elapsed, 1),
               "device": self.device, "per_hour" + ("_per_gpu" if self.device == "cuda" else ""):
                   round(rate, 1) if rate else None, "gpus": self.gpus, "executor": self.executor}
        if self.device == "cuda":
            from .exclusive import timed_together
            # Read back from the lines themselves: pairs of candidates timed on one card at once (0: none).
            out["timed_together"] = len(timed_together(self.timed))
        out["stages_s"] = dict(self.stages)     # where this run's judging time went (its records' stages_s)
        if stopped:
            out["interrupted"] = stopped
        out["environment"] = self.environment       # the machine (GPU, driver, versions): what compare checks
        return {"schema": SCHEMA, "summary": out}


def judge_all(problem, candidates: list[Candidate], opts, lines: Lines, executor, run: Run, progress=None,
              ship_source: bool = False, fmt: str | None = None, backend: str | None = None) -> None:
    """Judge every candidate on `executor` (gauntlet.executors: inline, one per GPU, or Ray) and write the
    lines in the candidates' order, whatever order the judgements finish in: a line waits only for those before
    it, so the output (and the --out file) is the same for one GPU or eight. `run` keeps the tally;
    `progress(i, n, text)` is told about each candidate as soon as it is judged. A stop (Interrupted) still writes
    every line already judged, out of turn, before it goes on up: nothing judged is lost, and each line carries its
    index. `ship_source`: jobs carry the candidate's text (for judges on other hosts). `fmt` and `backend`: --format
    and --backend (gauntlet.formats); each file's format is otherwise found from its own names, so a batch may mix
    native, KernelBench and GPU MODE files."""
    from .. import discover
    from . import task
    from ..judge.records.fingerprint import fingerprint
    total = len(candidates)
    ready: dict[int, dict] = {}           # judged (or known without judging), not yet written
    copies: dict[int, list[int]] = {}     # a judged candidate -> the later ones with the same fingerprint
    first: dict[str, int] = {}
    jobs = []
    for i, cand in enumerate(candidates):
        try:
            solution = discover.get_solution(problem.id, str(cand.path), fmt=fmt, backend=backend)
        except UsageError as exc:        # gone since it was listed: this candidate's line says so, the rest go on
            _done(run, progress, total, ready, _gone(problem, cand, i, opts, str(exc)))
            continue
        fp = _key(fingerprint(problem, solution, opts))
        old = lines.previous.get(fp)
        if old is not None:
            _done(run, progress, total, ready, dict(old, index=i, id=cand.id, source=str(cand.path), resumed=True))
        elif fp in first:                # the same source again in this run: judged once, its line repeated
            copies[first[fp]].append(i)
        else:
            first[fp], copies[i] = i, []
            jobs.append(task.make_job(i, problem, solution, opts, ship_source=ship_source, fmt=fmt,
                                      backend=backend))
    written = [0]
    try:
        _release(lines, ready, written)
        for job, result in executor.run(jobs):
            i = job["index"]
            cand = candidates[i]
            doc = dict(result["record"], schema=SCHEMA, index=i, id=cand.id, source=str(cand.path), resumed=False,
                       wall_s=result["wall_s"], judged_by=result["where"])
            _done(run, progress, total, ready, doc)
            for j in copies[i]:
                _done(run, progress, total, ready,
                      dict(doc, index=j, id=candidates[j].id, source=str(candidates[j].path), resumed=True))
            _release(lines, ready, written)
    except BaseException:
        for i in sorted(ready):          # stopped: what was judged is written all the same, out of turn
            lines.write(ready.pop(i))
        raise


def _gone(problem, cand: Candidate, i: int, opts, detail: str) -> dict:
    return {"schema": SCHEMA, "problem": problem.id, "solution": cand.id, "path": str(cand.path),
            "backend": None, "device": opts.device, "verdict": "error", "cases": {}, "timings": [],
            "reasons": [{"code": "import_error", "detail": detail, "repro": ""}],
            "index": i, "id": cand.id, "source": str(cand.path), "resumed": False, "wall_s": 0.0}


def _done(run: Run, progress, total: int, ready: dict, doc: dict) -> None:
    """A candidate's line is known: count it, say so, and hold it until the lines before it are out."""
    run.tally["resumed" if doc["resumed"] else "judged"] += 1
    if not doc["resumed"]:
        from ..judge.records.results import stage_totals
        for key, spent in stage_totals([doc]).items():     # totals only: a search judges thousands
            run.stages[key] = round(run.stages.get(key, 0.0) + spent, 3)
    if not doc["resumed"] and doc.get("timings"):       # only what the overlap check reads: a search keeps thousands
        run.timed.append({"id": f"#{doc['index']}", "timings": [
            {"dtype": t.get("dtype"), "shape": t.get("shape"), "alone": t["alone"]}
            for t in doc["timings"] if isinstance(t, dict) and t.get("alone")]})
    run.counts[doc["verdict"]] = run.counts.get(doc["verdict"], 0) + 1
    ready[doc["index"]] = doc
    if progress is not None:
        codes = ",".join(sorted({r["code"] for r in doc.get("reasons", [])}))
        where = doc.get("judged_by") or {}
        on = f" on GPU {where['device']}" if where.get("executor") in ("local", "ray") and where.get("device") \
            else ""
        progress(run.tally["judged"] + run.tally["resumed"], total,
                 f"{doc['id']}: {doc['verdict']}" + (f" ({codes})" if codes else "")
                 + (" (resumed)" if doc["resumed"] else f" in {doc['wall_s']:.1f}s{on}"))


def _release(lines: Lines, ready: dict, written: list) -> None:
    """Write the lines that no earlier line is still waiting for."""
    while written[0] in ready:
        lines.write(ready.pop(written[0]))
        written[0] += 1
