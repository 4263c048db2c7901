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
SHARED = {"harness.protocol", "harness.problem", "harness.inputs", "harness.discover", "harness.searchpath",
          "harness.reasons", "harness.gpu", "harness.cards", "harness.backends", "harness.backends.triton_interpreter",
          "harness.backends.triton_casts", "harness.backends.triton_autotune", "harness.backends.triton_key",
          "harness.formats"}
ENTRY = {"harness", "harness.plugin", "harness.__main__"}
# The folders whose docstrings state what they may import, and the trusted side's other rooms.
FOLDERS = ("harness.judge.values", "harness.judge.timing", "harness.judge.process", "harness.judge.records",
           "harness.judge.sandbox", "harness.executors", "harness.mutate")
TRUSTED = ("harness.judge", "harness.executors", "harness.mutate", "harness.cli")
MAX_JUDGE_LINES, MAX_FOLDER_FILES = 330, 10


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {name for name in found if name.split(".")[0] in ("harness", "reports")}


def _module(path: Path) -> str:
    rel = path.relative_to(HARNESS.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _files(sub: str):
    return sorted((HARNESS / sub).rglob("*.py")) if sub else sorted(HARNESS.glob("*.py"))


def _room(name: str) -> str:
    """The folder a module (or a name imported from it) lives in: one of FOLDERS, the judge's top level
    (`harness.judge`), another package of the harness, a shared module, or `reports`."""
    for folder in FOLDERS:
        if name == folder or name.startswith(folder + "."):
            return folder
    for package in ("harness.judge", "harness.child", "harness.cli", "harness.backends"):
        if name == package or name.startswith(package + "."):
            return package
    if name.startswith("reports"):
        return "reports"
    return name if name in SHARED or name in ENTRY else ".".join(name.split(".")[:2])


def _may_import(folder: str) -> set[str]:
    """The rooms a folder's docstring allows, from its "May import:" paragraph (`harness.judge` alone: all of it)."""
    doc = ast.get_docstring(ast.parse((HARNESS.parent / folder.replace(".", "/") / "__init__.py").read_text()))
    assert doc and "May import:" in doc, f"{folder}'s docstring says nothing of what it may import"
    line = doc[doc.index("May import:"):].split("\n\n")[0]
    named = set(re.findall(r"\b(harness(?:\.\w+)+|reports)\b", line))
    rooms = {_room(n) for n in named}
    if "harness.judge" in named:
        rooms |= {f for f in FOLDERS if f.startswith("harness.judge.")}
    return rooms


def test_child_code_imports_no_trusted_code():
    """The worker, its guards and its timing loop never import the judge (the checker, the oracle, scoring) or
    anything above it: the candidate shares their process and could patch whatever they hold."""
    for path in _files("child"):
        bad = {m for m in _imports(path) if m.startswith(TRUSTED + ("harness.plugin", "reports"))}
        assert not bad, f"{path.relative_to(HARNESS.parent)} imports judge-side code: {sorted(bad)}"


def test_trusted_code_imports_nothing_from_the_child():
    """Verdicts never run code the candidate could have patched: the judge starts workers by module name only."""
    for sub in ("judge", "executors", "mutate", "cli"):
        for path in _files(sub):
            bad = {m for m in _imports(path) if m.startswith("harness.child")}
            assert not bad, f"{path.relative_to(HARNESS.parent)} imports child-side code: {sorted(bad)}"


def test_shared_modules_import_only_shared_modules():
    shared_files = [p for p in HARNESS.rglob("*.py") if _module(p) in SHARED]
    assert len(shared_files) == len(SHARED), sorted(_module(p) for p in shared_files)
    for path in shared_files:
        bad = {m for m in _imports(path) if m.startswith(TRUSTED + ("harness.child",))}
        assert not bad, f"{_module(path)} is shared but imports {sorted(bad)}"


def test_every_module_is_on_one_side():
    """A new top-level module must be declared shared (here) or moved into a package."""
    packages = TRUSTED + ("harness.child",)
    loose = {_module(p) for p in HARNESS.rglob("*.py")} - SHARED - ENTRY
    loose = {m for m in loose if not any(m == p or m.startswith(p + ".") for p in packages)}
    assert not loose, f"modules on neither side of the boundary: {sorted(loose)}"


def test_each_folder_imports_only_what_its_docstring_allows():
    """values, timing, process, records, sandbox inside the judge; executors and mutate above it."""
    for folder in FOLDERS:
        allowed = _may_import(folder) | {folder}
        for path in sorted((HARNESS.parent / folder.replace(".", "/")).rglob("*.py")):
            rooms = {_room(m) for m in _imports(path) if m != "harness"} - SHARED
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
        if name.startswith("harness.cli") or name == "harness.__main__":
            continue
        bad = {m for m in _imports(path) if m.startswith("harness.cli")}
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
