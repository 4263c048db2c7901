"""Where problems and solutions are looked for: the user's own folders first, then the ones Gauntlet ships.

A user's folders follow the same contract as the shipped ones: a folder of problem folders (each `problem.yaml` +
`reference.py`), and a folder of `<problem>/<name>.py` solutions. Each of the two keys, `problems` and
`solutions`, is taken from the first of these that sets it:

1. the command line, `--problems PATH` / `--solutions PATH` (repeatable; relative to the current directory);
2. the environment, `GAUNTLET_PROBLEMS` / `GAUNTLET_SOLUTIONS` (`os.pathsep`-separated; relative to the current
   directory);
3. a `[tool.gauntlet]` table in the nearest `pyproject.toml` above the current directory that has one (`problems`,
   `solutions`: a path or a list of paths, relative to that file; `shipped = false` leaves Gauntlet's own out).

The sources are not merged: `--problems` replaces `GAUNTLET_PROBLEMS`, which replaces the pyproject's list (the
way PATH-like settings usually work, so what a command sees is what its nearest setting says). Solutions left
unset everywhere default to the `solutions/` folder beside each problems folder, where there is one. Gauntlet's
shipped problems and solutions come last. How ids that appear twice are resolved is gauntlet.discover's business.

The folder of that pyproject.toml (else of the nearest pyproject.toml, else the current directory) is the user's
project: the judge keeps its state (failing cases to replay) in its `.gauntlet/`, never beside the installed package.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

# The `gauntlet` package's own folder (harness/ of a checkout, or site-packages/gauntlet of a wheel), and the folder
# above it (a checkout's root, or site-packages).
PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGE_ROOT = PACKAGE_DIR.parent

ENV = {"problems": "GAUNTLET_PROBLEMS", "solutions": "GAUNTLET_SOLUTIONS"}
CONFIG_KEYS = ("problems", "solutions", "shipped")


class SearchPathError(ValueError):
    """A search-path setting that names no usable folder, or a malformed [tool.gauntlet]: the user's to fix."""


@dataclass(frozen=True)
class SearchPath:
    problems: tuple          # the user's folders of problem folders, in order (resolved Paths)
    solutions: tuple         # the user's folders of solutions/<problem>/ folders, in order
    project: Path            # where .gauntlet/ lives
    shipped: bool = True     # Gauntlet's own problems and solutions come after the user's
    config: Path | None = None                  # the pyproject.toml whose [tool.gauntlet] was read
    origins: tuple = ()      # ("problems", "where it came from"), ("solutions", ...): for `gauntlet list`


def shipped_folders() -> tuple[Path, Path]:
    """Gauntlet's own problems and solutions: package data inside the installed package (pyproject.toml maps
    problems/ to gauntlet/problems/ and solutions/ to gauntlet/solutions/), or problems/ and solutions/ of the
    checkout the package was imported from (an editable install runs harness/ in place)."""
    installed = PACKAGE_DIR / "problems", PACKAGE_DIR / "solutions"
    if installed[0].is_dir():
        return installed
    return PACKAGE_ROOT / "problems", PACKAGE_ROOT / "solutions"


def resolve(problems=None, solutions=None, *, start=None, environ=None) -> SearchPath:
    """The search path in force: `problems`/`solutions` are the command line's values (None: not given), `start`
    the folder the pyproject.toml search walks up from (default: the current directory; pytest's rootdir for the
    plugin). Command-line and environment paths are relative to the current directory."""
    cwd = Path.cwd().resolve()
    start = Path(start).resolve() if start else cwd
    environ = os.environ if environ is None else environ
    config, table = find_config(start)
    chosen, origins = {}, []
    for key, cli in (("problems", problems), ("solutions", solutions)):
        found = _pick(key, cli, environ, cwd, config, table)
        if found is not None:
            chosen[key] = found[0]
            origins.append((key, found[1]))
    if "solutions" not in chosen:
        chosen["solutions"] = [p.parent / "solutions" for p in chosen.get("problems", [])
                               if (p.parent / "solutions").is_dir()]
        if chosen["solutions"]:
            origins.append(("solutions", "the solutions/ beside each problems folder"))
    for key in ("problems", "solutions"):
        origin = dict(origins).get(key, "")
        for folder in chosen.get(key, []):
            _check_folder(key, folder, origin)
    shipped = table.get("shipped", True)
    if not isinstance(shipped, bool):
        raise SearchPathError(f"{config}: [tool.gauntlet] shipped must be true or false, got {shipped!r}")
    project = config.parent if config else _nearest_pyproject(start) or start
    return SearchPath(problems=tuple(_unique(chosen.get("problems", []))),
                      solutions=tuple(_unique(chosen["solutions"])), project=project, shipped=shipped,
                      config=config, origins=tuple(origins))


def _pick(key, cli, environ, cwd, config, table):
    """(folders, where they came from) from the first source that sets `key`, or None."""
    if cli:
        return [_absolute(p, cwd) for p in cli], f"set by --{key}"
    entries = [e for e in environ.get(ENV[key], "").split(os.pathsep) if e.strip()]
    if entries:
        return [_absolute(e, cwd) for e in entries], f"set by {ENV[key]}"
    if key in table:
        value = table[key]
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SearchPathError(f"{config}: [tool.gauntlet] {key} must be a path or a list of paths, "
                                  f"got {table[key]!r}")
        return [_absolute(v, config.parent) for v in value], f"set by {config} [tool.gauntlet]"
    return None


def _check_folder(key: str, folder: Path, origin: str) -> None:
    if not folder.is_dir():
        raise SearchPathError(f"{key} folder {folder} ({origin}) does not exist or is not a folder")
    if key == "problems" and (folder / "problem.yaml").is_file():
        raise SearchPathError(f"{folder} ({origin}) is one problem; name the folder that holds problem "
                              f"folders: {folder.parent}")


def find_config(start: Path) -> tuple[Path | None, dict]:
    """The nearest pyproject.toml at or above `start` with a [tool.gauntlet] table, and that table (else None, {}).
    Unknown keys are errors, as in problem.yaml: a misspelled `problem` must not silently fall back to defaults."""
    for folder in (start, *start.parents):
        path = folder / "pyproject.toml"
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "gauntlet" not in text:           # only a file that may hold the table is parsed (and blamed)
            continue
        try:
            doc = _toml().loads(text)
        except ValueError as exc:            # tomllib.TOMLDecodeError is a ValueError
            raise SearchPathError(f"{path}: not valid TOML: {exc}") from None
        table = doc.get("tool", {}).get("gauntlet") if isinstance(doc.get("tool"), dict) else None
        if table is None:
            continue
        if not isinstance(table, dict):
            raise SearchPathError(f"{path}: [tool.gauntlet] must be a table")
        unknown = sorted(set(table) - set(CONFIG_KEYS))
        if unknown:
            raise SearchPathError(f"{path}: [tool.gauntlet] has unknown key(s) {unknown}; known: {list(CONFIG_KEYS)}")
        return path, table
    return None, {}


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib
    import tomli                             # a dependency on Python 3.10 only (pyproject.toml)
    return tomli


def _nearest_pyproject(start: Path) -> Path | None:
    return next((f for f in (start, *start.parents) if (f / "pyproject.toml").is_file()), None)


def _absolute(path: str, base: Path) -> Path:
    return (base / Path(path).expanduser()).resolve()


def _unique(paths) -> list[Path]:
    out = []
    for p in paths:
        if p not in out:
            out.append(p)
    return out
