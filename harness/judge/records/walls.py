"""Each judgement's last wall time, kept in the judge's cache folder (`walls.json`), so that a later run on the same
machine starts its longest judgements first.

Why: with several judges (4 a card by default, and more cards with --gpus), a run ends with its last long
judgements running while the other slots idle. Which judgements are long is hard to tell beforehand: cold Triton
compiles, and problems whose correctness cases are large (grouped_gemm_moe's torch files took as long as a Triton
file with twice their dtypes). The stand-in order (`gauntlet.cli.run._weight`: dtypes, twice for a file that
compiles kernels of its own) gets part of it; the walls of the last run get the rest (docs/benchmarks.md, "Two GPUs
of one host at the defaults"). A judgement never judged here gets the stand-in, scaled by the seconds a unit of it
took among the ones that were, so both kinds sort together.

A wall is kept under the judgement's key and its options (the seed left out: a fresh one per run is the default),
so a run with --all-shapes or --examples 2 does not take its order from a run at the defaults. Nothing here decides a
verdict: a document that cannot be read is empty, and two runs writing at once may each lose the other's entries.
The judge's cache folder is out of every confined worker's reach (gauntlet.judge.process.cache).
"""
from __future__ import annotations

import json
import statistics
import time

from ..process import cache

NAME = "walls.json"
KEEP = 4000                  # entries at most; the oldest are forgotten first
IGNORED = ("seed", "peaks")  # options that change from run to run without changing a judgement's length


def key(job_key: str, options: dict) -> str:
    """`problem/solution@device` and the judge's options, as one string."""
    kept = {k: v for k, v in (options or {}).items() if k not in IGNORED}
    return f"{job_key} {json.dumps(kept, sort_keys=True, default=str)}"


def known() -> dict[str, float]:
    """Every wall kept, by key."""
    out = {}
    for k, entry in cache.read_json(NAME).items():
        wall = entry.get("wall_s") if isinstance(entry, dict) else None
        if isinstance(wall, (int, float)) and not isinstance(wall, bool) and wall >= 0:
            out[k] = float(wall)
    return out


def note(walls: dict[str, float]) -> None:
    """Keep these walls (seconds, by key), replacing older ones."""
    if not walls:
        return
    doc = cache.read_json(NAME)
    now = round(time.time())
    doc.update({k: {"wall_s": round(float(w), 2), "at": now} for k, w in walls.items()})
    if len(doc) > KEEP:
        by_age = sorted(doc, key=lambda k: doc[k].get("at", 0) if isinstance(doc[k], dict) else 0)
        for k in by_age[:len(doc) - KEEP]:
            del doc[k]
    cache.write_json(NAME, doc)


def longest_first(items: list, stand_in: list[float], walls: list[float | None]) -> list:
    """`items` in the order to start them: by each one's wall where known, else its stand-in times the median
    seconds per stand-in unit of those known (1 where none is); the longest first, the given order among equals."""
    rates = [w / s for w, s in zip(walls, stand_in) if w is not None and s > 0]
    rate = statistics.median(rates) if rates else 1.0
    expected = [w if w is not None else s * rate for w, s in zip(walls, stand_in)]
    order = sorted(range(len(items)), key=lambda i: -expected[i])       # sorted() is stable
    return [items[i] for i in order]
