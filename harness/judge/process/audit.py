"""Parent-side audits around a candidate: did it write into the source tree, and what does its source look like.

The tree check catches a candidate that edits the reference, the harness or a baseline on disk (which later
processes would import). The static notes are a second opinion only: a line in the report, never a verdict, since
any pattern can be obfuscated and many are legitimate.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ... import discover, searchpath
from ...discover import ROOT

_SKIP_PARTS = {"__pycache__", ".pytest_cache"}


def watched_paths(problem) -> list[Path]:
    """What a candidate could edit on disk to sway this or a later judgement: the harness and report code, this
    problem's folder (wherever the search path found it: the user's project, a checkout, site-packages), its
    baseline files, the checkout's pytest/packaging config, and the user's pyproject.toml whose [tool.gauntlet]
    says where problems are. Kept narrow on purpose: a user editing their own solution (or another problem) while a
    run goes on must not get an innocent candidate blamed."""
    paths = [*package_folders(), Path(problem.root), ROOT / "conftest.py", ROOT / "pyproject.toml"]
    config = discover.search_path().config
    return paths + ([config] if config else []) + list(discover.baseline_files(problem).values())


def package_folders() -> list[Path]:
    """The `gauntlet` package's folder and its reports' (harness/ and reports/ of a checkout; one folder in a wheel,
    where reports/ lies inside the package)."""
    import importlib.util
    spec = importlib.util.find_spec(f"{__package__.split('.')[0]}.reports")   # found, not imported
    pkg = searchpath.PACKAGE_DIR
    rep = Path(spec.origin).resolve().parent if spec and spec.origin else pkg
    return [pkg] if rep.is_relative_to(pkg) else [pkg, rep]


def source_tree_digest(paths: list[Path], root: Path = ROOT) -> dict[str, str]:
    """file -> hash, each file named relative to `root` where it lies under it (problems/gemm/reference.py in a
    checkout), else by its absolute path (a user's problem)."""
    digests = {}
    for base in paths:
        files = [base] if base.is_file() else (sorted(base.rglob("*")) if base.is_dir() else [])
        for path in files:
            if path.is_file() and not _SKIP_PARTS.intersection(path.parts):
                try:
                    digests[_name(path, root)] = hashlib.sha1(path.read_bytes()).hexdigest()
                except OSError:
                    continue
    return digests


def _name(path: Path, root: Path) -> str:
    path = path.resolve()
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def tree_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changed = [f"modified {p}" for p in before if p in after and before[p] != after[p]]
    changed += [f"deleted {p}" for p in before if p not in after]
    changed += [f"created {p}" for p in after if p not in before]
    return sorted(changed)


# pattern -> what it suggests; matched against the candidate's source text.
_SUSPICIOUS = {
    r"torch\.(matmul|mm|bmm|einsum|addmm|baddbmm|_scaled_mm|_int_mm|_grouped_mm)\b|F\.linear|\.matmul\(|\s@\s":
        "calls a library matmul (fine only for torch backends)",
    r"\bcublas|\bcudnn|cupy\.(matmul|dot|einsum)|cupy\.linalg": "reaches a vendor library directly",
    r"\bctypes\b": "uses ctypes (can patch memory or call libraries unseen)",
    r"os\.fork|subprocess|multiprocessing|threading\.Thread|os\.setsid": "starts threads or processes",
    r"gc\.get_objects|sys\._getframe|inspect\.stack|f_back|f_locals": "inspects the interpreter's memory or frames",
    r"(torch|time|harness|sys\.modules)[\w.\[\]'\"]*\s*=(?!=)": "assigns into torch/time/harness/sys.modules",
    r"data_ptr\(\)|_cache|lru_cache|functools\.cache": "keys or caches results (legitimate for compiled kernels)",
    r"Persisting|accessPolicyWindow|cudaLimitPersistingL2": "touches the persisting-L2 controls",
    r"os\._exit|sys\.exit|signal\.": "exits or handles signals",
    r"open\(|Path\(|\.write_text|\.write_bytes": "touches files",
}


def static_notes(path: Path) -> list[str]:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    notes = []
    for pattern, meaning in _SUSPICIOUS.items():
        for number, line in enumerate(text.splitlines(), 1):
            if re.search(pattern, line) and not line.lstrip().startswith("#"):
                notes.append(f"line {number}: {meaning}")
                break
    return notes
