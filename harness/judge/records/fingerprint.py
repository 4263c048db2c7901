"""What a verdict depends on, as hashes: the solution file, the problem's two files, its baselines, the harness's own
source, and the options that change a verdict. `gauntlet run` resumes a record only when all of these match, so a
changed kernel (or harness, or setting) is judged again instead of keeping an old `pass`.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from ... import discover
from ... import __file__ as _PACKAGE_FILE
from ..process import environment


def _sha(paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        path = Path(path)
        h.update(str(path.name).encode())
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def harness_digest() -> str:
    """Every source file of the harness package (wherever it was imported from): a changed check or timing method
    can change a verdict."""
    return _sha(sorted(Path(_PACKAGE_FILE).resolve().parent.rglob("*.py")))


def fingerprint(problem, solution, opts) -> dict:
    options = {"device": opts.device, "dtypes": sorted(opts.dtypes) if opts.dtypes else None,
               "examples": opts.examples, "seed": opts.seed, "timing": opts.timing,
               "case_timeout_s": opts.case_timeout_s, "timing_budget_s": opts.timing_budget_s,
               "max_shapes": opts.max_shapes, "max_edges": opts.max_edges, "shapes": opts.shapes,
               "sandbox": getattr(opts, "sandbox", "auto"), "time_limit_s": getattr(opts, "time_limit_s", None)}
    out = {"solution": _sha([solution.path]),
           "problem": _sha([problem.root / "problem.yaml", problem.reference_path]),
           "baselines": _sha(sorted(discover.baseline_files(problem).values(), key=lambda path: path.stem)),
           "harness": harness_digest(), "interpreter": interpreter_digest(environment.verify()), "options": options}
    if getattr(solution, "format", "native") != "native":
        # The same bytes judged as another format (--format) or backend (--backend) are another judgement. Kept out
        # of `options` and absent for native files, so records judged before adapters existed still compare.
        out["adapter"] = {"format": solution.format, "backend": solution.backend}
    return out


def interpreter_digest(env: dict) -> str:
    """The verified interpreter (gauntlet.judge.process.environment): which package files differ from their install
    record, and every `.pth` file start-up runs. A `.pth` dropped into site-packages, or an edited torch, re-judges."""
    h = hashlib.sha256(repr((sorted(env.get("modified", [])), sorted(env.get("pth", {}).items()))).encode())
    return h.hexdigest()[:16]


def changed_parts(old: dict | None, new: dict) -> list[str]:
    """Which parts differ ("solution", "options", ...); all of them when the old record has no fingerprint."""
    if not isinstance(old, dict):
        return ["no fingerprint (judged by an older Gauntlet)"]
    return [part for part in new if old.get(part) != new[part]]
