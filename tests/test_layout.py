"""The layout is a contract, held by a plain import scan.

- The trust boundary: what can run beside candidate code lives in harness/child/ (plus the shared modules); what
  decides verdicts lives in harness/judge/, and the trusted code above it (harness/executors/, harness/mutate/,
  the CLI, the pytest plugin) never touches the child's code either.
- Inside the judge, one folder per concern, layered: each folder's docstring says, on its "May import:" line, which
  other folders of the trusted side it may import, and this test holds every import to that line. Nothing climbs
  back up: no folder imports the judge's top-level modules (evaluate, calls, correctness), and nothing but the
  entry point imports the CLI.
"""
import ast
import re
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "harness"
SHARED = {"gauntlet.protocol", "gauntlet.problem", "gauntlet.inputs", "gauntlet.discover", "gauntlet.searchpath",
          "gauntlet.reasons", "gauntlet.gpu", "gauntlet.cards", "gauntlet.backends", "gauntlet.backends.triton_interpreter",
          "gauntlet.backends.triton_casts", "gauntlet.backends.triton_autotune", "gauntlet.backends.triton_key",
          "gauntlet.formats", "gauntlet.handoff"}
ENTRY = {"gauntlet", "gauntlet.plugin", "gauntlet.__main__"}
# The folders whose docstrings state what they may import, and the trusted side's other rooms.
FOLDERS = ("gauntlet.judge.values", "gauntlet.judge.timing", "gauntlet.judge.process", "gauntlet.judge.records",
           "gauntlet.judge.sandbox", "gauntlet.executors", "gauntlet.mutate")
TRUSTED = ("gauntlet.judge", "gauntlet.executors", "gauntlet.mutate", "gauntlet.cli")
MAX_JUDGE_LINES, MAX_FOLDER_FILES = 330, 10


def _imports(path: Path) -> set[str]:
    """The package modules (and names from them) a file imports, relative imports resolved to absolute names: the
    package imports itself relatively (pyproject.toml), so `from ..judge import x` in gauntlet.cli.run is
    gauntlet.judge and gauntlet.judge.x."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                source = ".".join(filter(None, [base, node.module]))
            else:
                source = node.module
            found |= {source} | {f"{source}.{a.name}" for a in node.names if not a.name.startswith("__")}
    return {name for name in found if name.split(".")[0] == "gauntlet"}


def _module(path: Path) -> str:
    """The import name of a file of harness/ (the package `gauntlet`) or reports/ (`gauntlet.reports`)."""
    rel = path.relative_to(HARNESS.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    top = {"harness": ("gauntlet",), "reports": ("gauntlet", "reports")}[parts[0]]
    return ".".join(top + tuple(parts[1:]))


def _folder(package: str) -> Path:
    """The folder of a package of harness/ (gauntlet.judge.values: harness/judge/values)."""
    return HARNESS.joinpath(*package.split(".")[1:])


def _files(sub: str):
    return sorted((HARNESS / sub).rglob("*.py")) if sub else sorted(HARNESS.glob("*.py"))


def _room(name: str) -> str:
    """The folder a module (or a name imported from it) lives in: one of FOLDERS, the judge's top level
    (`gauntlet.judge`), another package of the harness, a shared module, or `gauntlet.reports`."""
    for folder in FOLDERS:
        if name == folder or name.startswith(folder + "."):
            return folder
    for package in ("gauntlet.judge", "gauntlet.child", "gauntlet.cli", "gauntlet.backends"):
        if name == package or name.startswith(package + "."):
            return package
    if name.startswith("gauntlet.reports"):
        return "gauntlet.reports"
    return name if name in SHARED or name in ENTRY else ".".join(name.split(".")[:2])


def _may_import(folder: str) -> set[str]:
    """The rooms a folder's docstring allows, from its "May import:" paragraph (`gauntlet.judge` alone: all of it)."""
    doc = ast.get_docstring(ast.parse((_folder(folder) / "__init__.py").read_text()))
    assert doc and "May import:" in doc, f"{folder}'s docstring says nothing of what it may import"
    line = doc[doc.index("May import:"):].split("\n\n")[0]
    named = {"gauntlet.reports" if n == "reports" else n
             for n in re.findall(r"(?<![\w.])(gauntlet(?:\.\w+)+|reports)\b", line)}
    rooms = {_room(n) for n in named}
    if "gauntlet.judge" in named:
        rooms |= {f for f in FOLDERS if f.startswith("gauntlet.judge.")}
    return rooms


def test_child_code_imports_no_trusted_code():
    """The worker, its guards and its timing loop never import the judge (the checker, the oracle, scoring) or
    anything above it: the candidate shares their process and could patch whatever they hold."""
    for path in _files("child"):
        bad = {m for m in _imports(path) if m.startswith(TRUSTED + ("gauntlet.plugin", "gauntlet.reports"))}
        assert not bad, f"{path.relative_to(HARNESS.parent)} imports judge-side code: {sorted(bad)}"


def test_trusted_code_imports_nothing_from_the_child():
    """Verdicts never run code the candidate could have patched: the judge starts workers by module name only."""
    for sub in ("judge", "executors", "mutate", "cli"):
        for path in _files(sub):
            bad = {m for m in _imports(path) if m.startswith("gauntlet.child")}
            assert not bad, f"{path.relative_to(HARNESS.parent)} imports child-side code: {sorted(bad)}"


def test_shared_modules_import_only_shared_modules():
    shared_files = [p for p in HARNESS.rglob("*.py") if _module(p) in SHARED]
    assert len(shared_files) == len(SHARED), sorted(_module(p) for p in shared_files)
    for path in shared_files:
        bad = {m for m in _imports(path) if m.startswith(TRUSTED + ("gauntlet.child",))}
        assert not bad, f"{_module(path)} is shared but imports {sorted(bad)}"


def test_every_module_is_on_one_side():
    """A new top-level module must be declared shared (here) or moved into a package."""
    packages = TRUSTED + ("gauntlet.child",)
    loose = {_module(p) for p in HARNESS.rglob("*.py")} - SHARED - ENTRY
    loose = {m for m in loose if not any(m == p or m.startswith(p + ".") for p in packages)}
    assert not loose, f"modules on neither side of the boundary: {sorted(loose)}"


def test_each_folder_imports_only_what_its_docstring_allows():
    """values, timing, process, records, sandbox inside the judge; executors and mutate above it."""
    for folder in FOLDERS:
        allowed = _may_import(folder) | {folder}
        for path in sorted(_folder(folder).rglob("*.py")):
            rooms = {_room(m) for m in _imports(path) if m != "gauntlet"} - SHARED
            bad = {r for r in rooms if r not in allowed}
            assert not bad, (f"{_module(path)} imports from {sorted(bad)}; {folder}'s docstring allows "
                             f"{sorted(allowed - {folder})}")


def test_the_docstrings_allow_no_circle():
    """The allowed imports form layers: no folder may reach itself again through others."""
    allowed = {f: _may_import(f) & set(FOLDERS) - {f} for f in FOLDERS}

    def reach(start, seen):
        for nxt in allowed[start]:
            assert nxt not in seen, f"a circle of allowed imports: {' -> '.join(seen + [nxt])}"
            reach(nxt, seen + [nxt])
    for folder in FOLDERS:
        reach(folder, [folder])


def test_nothing_imports_the_cli_but_the_entry_point():
    for path in HARNESS.rglob("*.py"):
        name = _module(path)
        if name.startswith("gauntlet.cli") or name == "gauntlet.__main__":
            continue
        bad = {m for m in _imports(path) if m.startswith("gauntlet.cli")}
        assert not bad, f"{name} imports the CLI: {sorted(bad)}"


def test_the_judge_stays_a_house_of_small_rooms():
    """No judge file much over 300 lines, no folder over 10 files (issue 21): a concern that outgrows its file
    or its folder is split by what it does, not left to grow."""
    for path in sorted((HARNESS / "judge").rglob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_JUDGE_LINES, f"{path.relative_to(HARNESS.parent)}: {lines} lines"
    for folder in [HARNESS / "judge", *[p for p in (HARNESS / "judge").iterdir() if p.is_dir()],
                   HARNESS / "executors", HARNESS / "mutate", HARNESS / "cli"]:
        files = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(files) <= MAX_FOLDER_FILES, f"{folder.relative_to(HARNESS.parent)}: {len(files)} files"
