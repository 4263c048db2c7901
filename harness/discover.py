"""Find problems and solutions on disk. No registry: a folder is a problem, a file is a solution.

Where to look is gauntlet.searchpath's business (the user's folders, then the shipped ones); this module says what
is there. An id found twice is settled here, the same way everywhere:
- a problem of the user's with the id of a shipped one shadows it, and takes the shipped solutions of that id out
  with it (they were written against the shipped contract); `gauntlet list` says so;
- the same problem id in two of the user's own folders, or the same solution name twice for one problem, is an
  error naming both files: which one is meant cannot be guessed, and results are keyed by these names.

Solutions are read statically (their BACKEND and DTYPES are parsed from the source with `ast`, and so is the
format of a KernelBench or GPU MODE file: gauntlet.formats), so listing or planning a run never executes candidate
code in the trusted process.
"""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path

from . import formats, searchpath
from .problem import Problem, ProblemError, load_problem
from .searchpath import SearchPath, SearchPathError

ROOT = searchpath.PACKAGE_ROOT       # the folder holding the harness package (a checkout, or site-packages)
BACKENDS = ("torch", "triton", "cupy", "cute")


class UsageError(ValueError):
    """Bad input from the user: unknown problem, missing file, unknown dtype. The CLI exits 2 on it."""


@dataclass(frozen=True)
class SolutionInfo:
    name: str
    path: Path
    backend: str | None        # None when a native file declares no literal BACKEND (or an adapted one's is unknown)
    dtypes: tuple | None       # None: every dtype of the problem
    problem: str | None = None
    error: str | None = None   # the file does not parse (file, line and the offending text), or fits no format
    format: str | None = "native"      # native, kernelbench or gpumode (gauntlet.formats); None: fits none
    adapter: dict | None = None    # an adapted file: its format, backend and where the backend came from
    unsupported: str | None = None     # a file Gauntlet cannot judge (load_inline): not the candidate's failure


@dataclass(frozen=True)
class Located:
    """Where a problem id was found."""
    folder: Path
    shipped: bool                    # one of Gauntlet's own
    shadows: Path | None = None      # the shipped problem folder of the same id that this one hides


# --- the search path in force ----------------------------------------------------------------------------------

_active: SearchPath | None = None


def use(path: SearchPath | None) -> SearchPath | None:
    """Make `path` the search path of this process (the CLI with its --problems, the pytest plugin for its
    session); None goes back to resolving from the environment and the cwd's pyproject.toml on each call. Returns
    the one it replaces, so a caller can put it back."""
    global _active
    previous, _active = _active, path
    return previous


def search_path() -> SearchPath:
    return _active if _active is not None else searchpath.resolve()


def problems_dir() -> Path:
    """Gauntlet's shipped problems folder (problems/ in a checkout)."""
    return searchpath.shipped_folders()[0]


def solutions_dir() -> Path:
    """Gauntlet's shipped solutions folder (solutions/ in a checkout)."""
    return searchpath.shipped_folders()[1]


# --- problems --------------------------------------------------------------------------------------------------

def locate_problems(sp: SearchPath | None = None) -> dict[str, Located]:
    """Every problem id on the search path and its folder, sorted by id."""
    sp = sp or search_path()
    shipped_root = problems_dir().resolve()
    found: dict[str, Located] = {}
    for root in sp.problems:
        for folder in _problem_folders(root):
            if sp.shipped and folder.parent == shipped_root:
                continue                              # the shipped folder named as the user's: it stays shipped
            other = found.get(folder.name)
            if other is not None:
                raise SearchPathError(f"problem {folder.name!r} is in two of your problem folders: {other.folder} "
                                      f"and {folder}; a problem's id is its folder name, so rename one")
            found[folder.name] = Located(folder, shipped=False)
    if sp.shipped:
        for folder in _problem_folders(shipped_root):
            mine = found.get(folder.name)
            found[folder.name] = Located(mine.folder, False, shadows=folder) if mine else Located(folder, True)
    return dict(sorted(found.items()))


def _problem_folders(root: Path) -> list[Path]:
    root = Path(root).resolve()
    return sorted(p for p in root.iterdir() if (p / "problem.yaml").is_file()) if root.is_dir() else []


def problem_ids(sp: SearchPath | None = None) -> list[str]:
    return list(locate_problems(sp))


def _unknown(kind: str, name: str, known: list[str]) -> UsageError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(f"unknown {kind} {name!r}{hint}; known: {', '.join(known) or 'none'}")


def get_problem(problem_id: str, sp: SearchPath | None = None) -> Problem:
    sp = sp or search_path()
    located = locate_problems(sp)
    if problem_id not in located:
        raise _unknown("problem", problem_id, list(located))
    return _checked(load_problem(located[problem_id].folder), sp, located[problem_id])


def all_problems(sp: SearchPath | None = None) -> list[Problem]:
    sp = sp or search_path()
    return [_checked(load_problem(loc.folder), sp, loc) for loc in locate_problems(sp).values()]


def problems_and_errors(sp: SearchPath | None = None) -> tuple[list[Problem], dict[str, str]]:
    """Every problem on the search path that loads, and for each one that does not, its error (by folder name): one
    author's typo must not keep a run from judging the other problems (`gauntlet run` reports it as the problem's
    fault, as pytest fails that problem's own items)."""
    sp = sp or search_path()
    found, broken = [], {}
    for name, loc in locate_problems(sp).items():
        try:
            found.append(_checked(load_problem(loc.folder), sp, loc))
        except ProblemError as exc:          # a search path the user got wrong still stops the run: SearchPathError
            broken[name] = str(exc)
    return found, broken


def _checked(problem: Problem, sp: SearchPath, located: Located) -> Problem:
    """The problem's baselines are solutions that exist: a typo is the problem author's error, said at load. Their
    files are kept on the problem (`baseline_paths`), so every process judges against the very same ones."""
    for label, name in problem.baselines.items():
        files, where = _baseline_candidates(problem, label, name, sp, located)
        if not files:
            raise ProblemError(_missing_baseline(problem, label, name, where))
        if len(files) > 1:
            raise SearchPathError(f"baseline {name!r} of problem {problem.id!r} is found twice: {files[0]} and "
                                  f"{files[1]}; rename one")
        problem.baseline_paths[label] = files[0]
    return problem


def _baseline_candidates(problem: Problem, label, name, sp: SearchPath, located: Located) -> tuple[list, list]:
    """(files named by the baseline, folders searched). `name` is a solution of this problem, private (`_name`) or
    not (for a copy of a shipped problem, also the shipped one's: _origins); `other/name` is one of problem
    `other`'s, in the user's solutions/<other>/ folders and in Gauntlet's own
    solutions/<other>/ (also when this problem is the user's: naming it is the author's explicit choice), so a
    user's problem can take a shipped solution, such as `gemm/torch_matmul` (cuBLAS), as its baseline."""
    parts = name.split("/") if isinstance(name, str) else []
    if not (1 <= len(parts) <= 2 and all(p and p.isidentifier() for p in parts)):
        raise ProblemError(f"{problem.root / 'problem.yaml'}: baseline {label!r} must be a solution's name "
                           f"(NAME, a file NAME.py beside this problem's solutions) or PROBLEM/NAME (another "
                           f"problem's, Gauntlet's own included), got {name!r}")
    if len(parts) == 1:
        folders = solution_folders(problem.id, sp, located)
        if not located.shipped and not _named(folders, name):
            folders += [f for f in _origins(problem) if _named([f], name)][:1]
    else:
        folders = [(Path(root) / parts[0]).resolve() for root in (*sp.solutions, solutions_dir())]
        folders = [f for i, f in enumerate(folders) if f.is_dir() and f not in folders[:i]]
    return _named(folders, parts[-1]), folders


def _named(folders, name: str) -> list[Path]:
    return [f / f"{name}.py" for f in folders if (f / f"{name}.py").is_file()]


def _origins(problem: Problem) -> list[Path]:
    """The shipped solution folders a copy of a shipped problem takes a plain baseline name from when the user's own
    folders lack it: those of the shipped problems whose reference.py is this one's byte for byte (the one of the
    same id first). So a copied problem judges as copied, against the baseline the shipped one uses, without its
    `baselines:` being re-pointed; a problem whose behaviour differs (a reference of its own) needs its baseline
    written, since a shipped kernel answers the shipped problem's question."""
    try:
        mine = (problem.root / "reference.py").read_bytes()
    except OSError:
        return []
    same = [f for f in _problem_folders(problems_dir()) if (f / "reference.py").is_file()
            and (f / "reference.py").read_bytes() == mine]
    same.sort(key=lambda f: f.name != problem.id)
    return [solutions_dir() / f.name for f in same]


def _missing_baseline(problem: Problem, label: str, name: str, folders: list) -> str:
    """What was searched, what exists, and, where Gauntlet ships a solution of that name, what to write instead."""
    owner = name.split("/")[0] if "/" in name else problem.id
    where = ", ".join(str(f) for f in folders) or f"solutions/{owner}/ (no such folder on the search path)"
    known = [p.stem for f in folders for p in sorted(f.glob("*.py"))]
    message = (f"{problem.root / 'problem.yaml'}: baseline {label!r} names solution {name!r}, which does not exist "
               f"in {where}; known: {', '.join(known) or 'none'}")
    stem = name.split("/")[-1]
    shipped = sorted(f.parent.name for f in solutions_dir().glob(f"*/{stem}.py")
                     if f"{f.parent.name}/{stem}" != name)
    if problem.id in shipped:             # a copy of a shipped problem: its own shipped baseline is the one meant
        shipped = [problem.id]
    if shipped:
        choices = " or ".join(f"`{label}: {pid}/{stem}`" for pid in shipped)
        message += f". Gauntlet ships a solution of that name: to use it, write {choices} under `baselines:`"
    return message


def baseline_files(problem: Problem) -> dict[str, Path]:
    """label -> file of each baseline: as found when the problem was loaded through this module, else looked up on
    the search path in force (a Problem made with load_problem directly)."""
    if problem.baselines and not problem.baseline_paths:
        sp = search_path()
        located = locate_problems(sp).get(problem.id) or Located(problem.root, shipped=False)
        _checked(problem, sp, located)
    return dict(problem.baseline_paths)


# --- solutions -------------------------------------------------------------------------------------------------

def solution_folders(problem_id: str, sp: SearchPath | None = None, located: Located | None = None) -> list[Path]:
    """The folders that hold this problem's solutions: <each user solutions folder>/<id>/, then the shipped
    solutions/<id>/ unless the problem is the user's own."""
    sp = sp or search_path()
    located = located or locate_problems(sp).get(problem_id)
    roots = list(sp.solutions) + ([solutions_dir()] if located is not None and located.shipped else [])
    out = []
    for root in roots:
        folder = (Path(root) / problem_id).resolve()
        if folder.is_dir() and folder not in out:
            out.append(folder)
    return out


def _solutions(problem_id: str, sp: SearchPath, located: Located | None) -> list[SolutionInfo]:
    by_name: dict[str, SolutionInfo] = {}
    for folder in solution_folders(problem_id, sp, located):
        for path in sorted(p for p in folder.glob("*.py") if not p.name.startswith("_")):
            other = by_name.get(path.stem)
            if other is not None:
                raise SearchPathError(f"solution {path.stem!r} of problem {problem_id!r} is found twice: {other.path} "
                                      f"and {path}; results are keyed by problem and solution name, so rename one")
            by_name[path.stem] = read_solution(path, problem_id)
    return sorted(by_name.values(), key=lambda s: s.name)


def solutions_for(problem_id: str, sp: SearchPath | None = None) -> list[SolutionInfo]:
    sp = sp or search_path()
    return _solutions(problem_id, sp, locate_problems(sp).get(problem_id))


def get_solution(problem_id: str, name_or_path: str, sp: SearchPath | None = None, fmt: str | None = None,
                 backend: str | None = None) -> SolutionInfo:
    """A solution on the search path by name, or any file path (an AI-generated candidate, say). `fmt` and
    `backend`: --format and --backend (gauntlet.formats), for a file of another format."""
    path = Path(name_or_path)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise UsageError(_not_found(problem_id, path, sp))
        return read_solution(path.resolve(), problem_id, fmt, backend)
    found = {s.name: s for s in solutions_for(problem_id, sp)}
    if name_or_path not in found:
        raise _unknown(f"solution for {problem_id}", name_or_path, list(found))
    if fmt not in (None, "auto") or backend:
        return read_solution(found[name_or_path].path, problem_id, fmt, backend)
    return found[name_or_path]


def _not_found(problem_id: str, path: Path, sp: SearchPath | None) -> str:
    """What exists instead: the .py files in the folder named (or that it does not exist), and the problem's
    solutions by name (which `eval` also takes)."""
    folder = path.resolve().parent
    if folder.is_dir():
        files = sorted(p.name for p in folder.glob("*.py"))[:12]
        there = f"{folder} holds {', '.join(files) if files else 'no .py file'}"
    else:
        there = f"there is no folder {folder}"
    try:
        names = [s.name for s in solutions_for(problem_id, sp)]
    except (SearchPathError, ProblemError):
        names = []
    known = f"; solutions of {problem_id} by name: {', '.join(names)}" if names else ""
    return f"solution file not found: {path} ({there}){known}"


def read_solution(path: Path, problem_id: str | None = None, fmt: str | None = None,
                  backend: str | None = None) -> SolutionInfo:
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
    dtypes = values.get("DTYPES")
    dtypes = tuple(dtypes) if isinstance(dtypes, (tuple, list)) else None
    found = formats.read(tree, values, fmt, backend)
    return SolutionInfo(path.stem, path, found.backend, dtypes, problem_id, error=found.error,
                        format=found.format, adapter=found.adapter or None, unsupported=found.unsupported)


__all__ = ["BACKENDS", "Located", "ProblemError", "SearchPathError", "SolutionInfo", "UsageError", "all_problems",
           "baseline_files", "get_problem", "get_solution", "locate_problems", "problem_ids", "read_solution",
           "search_path", "solution_folders", "solutions_for", "use"]
