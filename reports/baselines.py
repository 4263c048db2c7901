"""What a problem's baseline runs, in a reader's words, for the page's explanation of its speedups.

A record names each baseline only by its label in the problem ("cublas"). The problem's problem.yaml maps that label
to a solution file of its own (`baselines: {cublas: torch_matmul}`), whose docstring's first sentence says what it
runs ("cuBLAS (or the CPU BLAS) through torch.matmul, in the input dtype"). Both are read here from the problems and
solutions Gauntlet ships, statically (yaml and ast: nothing is imported or run), beside this package in a checkout
and in a wheel alike. A problem that is not shipped, or whose shipped problem.yaml no longer names the label a
record carries, gets no description: the page then shows the label alone rather than guess.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import yaml

# The folder holding problems/ and solutions/: a checkout's root (reports/ sits beside harness/), or
# site-packages/gauntlet of a wheel (gauntlet/reports beside gauntlet/problems).
SHIPPED = Path(__file__).resolve().parent.parent
DESCRIPTION_LIMIT = 150
# How a baseline's docstring introduces itself: "The baseline: ...", "Baseline: ...", "The `eager` baseline: ...".
_LEAD = re.compile(r"^(the\s+)?(`[^`]*`\s+)?(baseline|reference time)\s*:\s*", re.IGNORECASE)


def describe_baseline(problem: str, label: str) -> str:
    """One sentence on what `label` runs for `problem`, or "" where the shipped files do not say."""
    solution = _shipped_baselines(problem).get(label)
    return _first_sentence(SHIPPED / "solutions" / problem / f"{solution}.py") if solution else ""


@lru_cache(maxsize=None)
def _shipped_baselines(problem: str) -> dict:
    # The id comes from a results file: only a plain folder name is looked up, never a path.
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", problem) or ".." in problem:
        return {}
    try:
        data = yaml.safe_load((SHIPPED / "problems" / problem / "problem.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    baselines = data.get("baselines") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in baselines.items()} if isinstance(baselines, dict) else {}


@lru_cache(maxsize=None)
def _first_sentence(path: Path) -> str:
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, ValueError):
        return ""
    if not doc:
        return ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    sentence = re.split(r"(?<=\.)\s+(?=[A-Z])", paragraph)[0].rstrip(".")
    sentence = _LEAD.sub("", sentence)
    if len(sentence) > DESCRIPTION_LIMIT:
        sentence = sentence[:DESCRIPTION_LIMIT].rsplit(" ", 1)[0] + " …"
    return sentence
