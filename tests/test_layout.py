"""The trust boundary is the layout: what can run beside candidate code lives in harness/child/ (plus the shared
modules), what decides verdicts lives in harness/judge/. A plain import scan keeps it so."""
import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "harness"
SHARED = {"harness.protocol", "harness.problem", "harness.inputs", "harness.discover", "harness.searchpath",
          "harness.reasons", "harness.gpu", "harness.backends", "harness.backends.triton_interpreter",
          "harness.backends.triton_casts", "harness.backends.triton_autotune", "harness.formats"}


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


def test_child_code_imports_no_judge_code():
    """The worker, its guards and its timing loop never import the judge (the checker, the oracle, scoring): the
    candidate shares their process and could patch whatever they hold."""
    for path in _files("child"):
        bad = {m for m in _imports(path) if m.startswith(("harness.judge", "harness.cli", "harness.plugin", "reports"))}
        assert not bad, f"{path.relative_to(HARNESS.parent)} imports judge-side code: {sorted(bad)}"


def test_judge_code_imports_nothing_from_the_child():
    """Verdicts never run code the candidate could have patched: the judge starts workers by module name only."""
    for path in _files("judge"):
        bad = {m for m in _imports(path) if m.startswith("harness.child")}
        assert not bad, f"{path.relative_to(HARNESS.parent)} imports child-side code: {sorted(bad)}"


def test_shared_modules_import_only_shared_modules():
    shared_files = [p for p in HARNESS.rglob("*.py") if _module(p) in SHARED]
    assert len(shared_files) == len(SHARED), sorted(_module(p) for p in shared_files)
    for path in shared_files:
        bad = {m for m in _imports(path) if m.startswith(("harness.judge", "harness.child", "harness.cli"))}
        assert not bad, f"{_module(path)} is shared but imports {sorted(bad)}"


def test_every_module_is_on_one_side():
    """A new top-level module must be declared shared (here) or moved under judge/ or child/."""
    entry = {"harness", "harness.cli", "harness.plugin", "harness.__main__"}
    loose = {_module(p) for p in HARNESS.rglob("*.py")} - SHARED - entry
    loose = {m for m in loose if not m.startswith(("harness.judge", "harness.child"))}
    assert not loose, f"modules on neither side of the boundary: {sorted(loose)}"
