"""Find problems and solutions on disk. No registry: a folder is a problem, a file is a solution.

Solutions are read statically (their BACKEND and DTYPES are parsed from the source with `ast`), so listing or
planning a run never executes candidate code in the trusted process.
"""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path

from harness.problem import Problem, ProblemError, load_problem

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("torch", "triton", "cupy", "cute")


class UsageError(ValueError):
    """Bad input from the user: unknown problem, missing file, unknown dtype. The CLI exits 2 on it."""


@dataclass(frozen=True)
class SolutionInfo:
    name: str
    path: Path
    backend: str | None        # None when the file does not declare a literal BACKEND
    dtypes: tuple | None       # None: every dtype of the problem
    problem: str | None = None
    error: str | None = None   # the file does not parse: file, line and the offending text


def problems_dir() -> Path:
    return ROOT / "problems"


def solutions_dir() -> Path:
    return ROOT / "solutions"


def problem_ids() -> list[str]:
    root = problems_dir()
    return sorted(p.name for p in root.iterdir() if (p / "problem.yaml").is_file()) if root.is_dir() else []


def _unknown(kind: str, name: str, known: list[str]) -> UsageError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(f"unknown {kind} {name!r}{hint}; known: {', '.join(known) or 'none'}")


def get_problem(problem_id: str) -> Problem:
    known = problem_ids()
    if problem_id not in known:
        raise _unknown("problem", problem_id, known)
    return _checked(load_problem(problems_dir() / problem_id))


def all_problems() -> list[Problem]:
    return [_checked(load_problem(problems_dir() / pid)) for pid in problem_ids()]


def _checked(problem: Problem) -> Problem:
    """The problem's baselines are solutions that exist: a typo is the problem author's error, said at load."""
    for label, name in problem.baselines.items():
        if not isinstance(name, str) or not (solutions_dir() / problem.id / f"{name}.py").is_file():
            known = [s.name for s in solutions_for(problem.id)]
            raise ProblemError(f"{problem.root / 'problem.yaml'}: baseline {label!r} names solution {name!r}, "
                               f"which does not exist in solutions/{problem.id}/; known: {', '.join(known) or 'none'}")
    return problem


def solutions_for(problem_id: str) -> list[SolutionInfo]:
    folder = solutions_dir() / problem_id
    if not folder.is_dir():
        return []
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    return [read_solution(p, problem_id) for p in files]


def get_solution(problem_id: str, name_or_path: str) -> SolutionInfo:
    """A shipped solution by name, or any file path (an AI-generated candidate, say)."""
    path = Path(name_or_path)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise UsageError(f"solution file not found: {name_or_path}")
        return read_solution(path.resolve(), problem_id)
    known = [s.name for s in solutions_for(problem_id)]
    if name_or_path not in known:
        raise _unknown(f"solution for {problem_id}", name_or_path, known)
    return read_solution(solutions_dir() / problem_id / f"{name_or_path}.py", problem_id)


def read_solution(path: Path, problem_id: str | None = None) -> SolutionInfo:
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        text = (exc.text or "").strip()
        where = f"{path}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else "")
        return SolutionInfo(path.stem, path, None, None, problem_id,
                            error=f"{where}: SyntaxError: {exc.msg}" + (f": {text}" if text else ""))
    except (UnicodeDecodeError, ValueError) as exc:
        return SolutionInfo(path.stem, path, None, None, problem_id, error=f"{path}: cannot be read as Python: {exc}")
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    backend = values.get("BACKEND") if isinstance(values.get("BACKEND"), str) else None
    dtypes = values.get("DTYPES")
    dtypes = tuple(dtypes) if isinstance(dtypes, (tuple, list)) else None
    return SolutionInfo(path.stem, path, backend, dtypes, problem_id)


__all__ = ["BACKENDS", "ProblemError", "SolutionInfo", "UsageError", "all_problems", "get_problem",
           "get_solution", "problem_ids", "read_solution", "solutions_for"]
