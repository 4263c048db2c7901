"""Failing cases, kept and replayed first. Hypothesis' own example database is switched off by the `@seed` that
makes each judgement reproducible (hypothesis.seed sets database=None), so the judge keeps its own: the shrunk
failing (shape, seed) of each candidate file, problem, dtype and device, in .gauntlet/failures/ of the user's project
(gauntlet.searchpath: the folder of the pyproject.toml above the current directory, else the current directory),
never beside an installed package. The next judgement of that file replays them before fuzzing, so a fix is checked
against the case that broke it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ... import discover

DIR: Path | None = None     # the default folder; None: <project>/.gauntlet/failures (set by tests)
KEEP = 20          # per file: the newest failing cases


def folder(where=None) -> Path:
    """`where` (a judgement's Options.failures_dir) if given, else DIR, else the project's .gauntlet/failures."""
    if where is not None:
        return Path(where)
    return DIR if DIR is not None else discover.search_path().project / ".gauntlet" / "failures"


def _path(problem_id: str, solution_path, dtype: str, device: str, where=None) -> Path:
    key = hashlib.sha256(str(Path(solution_path).resolve()).encode()).hexdigest()[:16]
    return folder(where) / problem_id / f"{Path(solution_path).stem}-{key}-{dtype}-{device}.json"


def load(problem_id: str, solution_path, dtype: str, device: str, where=None) -> list[tuple[dict, int]]:
    try:
        doc = json.loads(_path(problem_id, solution_path, dtype, device, where).read_text())
        return [(dict(c["shape"]), int(c["seed"])) for c in doc.get("cases", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def save(problem_id: str, solution_path, dtype: str, device: str, shape: dict, seed: int, where=None) -> None:
    cases = [c for c in load(problem_id, solution_path, dtype, device, where) if c != (shape, seed)]
    cases = ([(shape, seed)] + cases)[:KEEP]
    path = _path(problem_id, solution_path, dtype, device, where)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"cases": [{"shape": s, "seed": k} for s, k in cases]}))
        os.replace(tmp, path)
    except OSError:
        pass          # a read-only checkout judges all the same, it only forgets
