"""Every module the harness imports is a dependency of the base wheel (issue 18: `pip install <wheel>` without
numpy made every judgement of every candidate a `crash` blamed on the candidate). Optional backends (Triton, CuPy,
the CUTLASS DSL) are extras and imported only where a solution needs them."""
import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIST = {"yaml": "pyyaml"}                                  # import name -> distribution name, where they differ
OPTIONAL = {"triton", "cupy", "cutlass",                   # the extras: [triton], [cupy], [cute]
            "jsonschema",                                   # [test]: gauntlet.reports.schema.problems validates with it
            "ray"}                                          # [ray]: --executor ray (harness/executors/cluster)
USED_THROUGH_TORCH = {"numpy": "Tensor.numpy() on the harness's wire (harness/protocol.py)"}
OWN = {"gauntlet", "__future__"}


def _imports() -> dict:
    found: dict = {}
    for path in sorted((ROOT / "harness").rglob("*.py")) + sorted((ROOT / "reports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in OWN:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def _base_dependencies() -> set:
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].strip().lower() for d in deps}


def test_every_module_the_harness_imports_is_a_base_dependency_or_an_extra():
    base = _base_dependencies()
    missing = {m: sorted(paths)[:3] for m, paths in _imports().items()
               if m not in OPTIONAL and DIST.get(m, m) not in base}
    assert not missing, f"imported but not a dependency of the base wheel: {missing}"
    for module, why in USED_THROUGH_TORCH.items():
        assert DIST.get(module, module) in base, f"{module} is needed for {why}"


def test_triton_on_the_cpu_is_unsupported_where_its_interpreter_cannot_run(monkeypatch):
    """Triton <= 3.6's interpreter with numpy >= 2.4 (the H100 runner's numpy 2.5) raises inside every kernel: the
    backend is `unsupported` on the CPU, with the reason, instead of every Triton kernel's judgement being a crash
    blamed on the candidate. Triton on the GPU is not affected."""
    from importlib import metadata

    from gauntlet import backends
    versions = {"triton": "3.6.0", "numpy": "2.5.2"}
    monkeypatch.setattr(metadata, "version", lambda name: versions[name])
    ok, why = backends.status("triton", "cpu")
    assert not ok and "numpy 2.5.2" in why and "numpy<2.4" in why
    assert backends.status("torch", "cpu") == (True, "")
    versions.update(numpy="2.3.5")
    assert backends.status("triton", "cpu") == (True, "")
    versions.update(triton="3.7.0", numpy="2.5.2")      # a later Triton is not presumed broken
    assert backends.status("triton", "cpu") == (True, "")


def test_a_missing_backend_package_says_the_install_that_fixes_it(monkeypatch):
    """A plain `pip install gauntlet` has no Triton: its solutions are `unsupported`, and the reason names the extra
    to install, not only what is absent. CuPy and CuTe on the CPU say they need a GPU (installing would not help)."""
    import importlib.util

    from gauntlet import backends
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("triton", "cupy", "cutlass") else real(name, *a))
    monkeypatch.setattr(backends, "cuda_available", lambda: True)
    for backend, module in (("triton", "triton"), ("cupy", "cupy"), ("cute", "cutlass")):
        ok, why = backends.status(backend, "cuda")
        assert not ok and why.startswith(f"the {module!r} package is not installed")
        assert f"pip install 'gauntlet[{backend}]'" in why
    ok, why = backends.status("triton", "cpu")
    assert not ok and "pip install 'gauntlet[triton]'" in why
    assert backends.status("cupy", "cpu") == (False, "cupy kernels need a GPU; this run is on the CPU")


def test_a_triton_worker_on_a_gpu_imports_triton_before_its_gate_and_nothing_else_does():
    """backends.preload: what the candidate's import would load first, loaded by the worker ahead of the gate, on a GPU
    only (on the CPU, TRITON_INTERPRET must be set first: after_import's business), and never a library that might
    touch the GPU as it imports (CuPy, the CuTe DSL)."""
    import subprocess
    script = ("import sys\nfrom gauntlet import backends\n"
              "backends.preload('triton', 'cpu'); backends.preload('cupy', 'cuda'); backends.preload('cute', 'cuda')\n"
              "before = sorted(m for m in ('triton', 'cupy', 'cutlass') if m in sys.modules)\n"
              "backends.preload('triton', 'cuda')\n"
              "print(before, 'triton.language' in sys.modules)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.stdout.split() == ["[]", "True"], out.stderr
