"""Gauntlet works outside its checkout: a wheel built from the repository carries the harness, the reports and the
shipped problems and solutions; installed in a fresh virtualenv that cannot see the checkout, `gauntlet list`,
`gauntlet eval` and pytest in a user's own project (its own problem and kernels, found through [tool.gauntlet])
all work, and nothing is written beside the installed package.

Offline on purpose: the wheel is built with this interpreter's setuptools (--no-build-isolation) and installed with
--no-deps --no-index; the fresh venv borrows torch, hypothesis, PyYAML and pytest from this environment through a
.pth line (a path line only: the .pth files there, such as an editable install's finder, are not run).
"""
import os
import shutil
import site
import subprocess
import sys
import textwrap
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from harness import discover

pytest_plugins = ["pytester"]

CHECKOUT = Path(__file__).resolve().parents[1]
SHIPPED = ("pyproject.toml", "README.md", "harness", "reports", "problems", "solutions")

# A user's project: its own problem, a baseline kept private (_eager.py: not judged itself), a kernel that is right
# and one that is wrong, and a kernel for the shipped gemm problem.
PROJECT = {
    "pyproject.toml": """
        [project]
        name = "my-kernels"
        version = "0"

        [tool.gauntlet]
        problems = ["kernels/problems"]
        """,
    "kernels/problems/scale_add/problem.yaml": """
        id: scale_add
        title: out = 2 x + y
        dims: [N]
        dtypes:
          float32: {torch: float32}
        fuzz:
          cpu: {N: [1, 4096]}
        benchmark:
          - {N: 1048576, source: "1M elements"}
        baselines:
          eager: _eager
        flops: "2 * N"
        bytes: "2 * N * bytes_in + N * bytes_out"
        """,
    "kernels/problems/scale_add/reference.py": """
        import torch


        def make_inputs(shape, dtype, seed, device):
            g = torch.Generator(device=device).manual_seed(seed)
            return tuple(torch.randn(shape["N"], generator=g, device=device).to(dtype) for _ in range(2))


        def reference(x, y):
            return 2 * x + y
        """,
    "kernels/solutions/scale_add/_eager.py": """
        BACKEND = "torch"


        def solve(x, y):
            return 2 * x + y
        """,
    "kernels/solutions/scale_add/fused.py": """
        import torch

        BACKEND = "torch"


        def solve(x, y):
            return torch.add(y, x, alpha=2)
        """,
    "kernels/solutions/scale_add/wrong_sign.py": """
        BACKEND = "torch"


        def solve(x, y):
            return 2 * x - y
        """,
    "my_gemm.py": """
        import torch

        BACKEND = "torch"


        def solve(a, b):
            return torch.mm(a, b)
        """,
}


def _make_project(root: Path, files: dict = PROJECT) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def _run(args, cwd, env, timeout=240):
    out = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the sources, so the build's own files (build/, *.egg-info) never land in the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in SHIPPED:
        source = CHECKOUT / name
        if source.is_dir():
            shutil.copytree(source, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(source, src / name)
    code, out = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                      "-q", "-w", tmp / "dist", src], cwd=tmp, env=os.environ)
    assert code == 0, out
    (built,) = (tmp / "dist").glob("gauntlet-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> Path:
    """A venv made by the base interpreter (not this one, whose editable install points at the checkout), with the
    wheel installed and this environment's site-packages appended for the dependencies."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    base = Path(getattr(sys, "_base_executable", "") or Path(sys.base_prefix) / "bin" / "python3")
    code, out = _run([base, "-m", "venv", "--system-site-packages", "--without-pip", venv], cwd=venv.parent,
                     env=os.environ)
    assert code == 0, out
    python = venv / "bin" / "python"
    code, out = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q",
                      wheel], cwd=venv.parent, env=os.environ)
    assert code == 0, out
    # Only after the install, so pip never sees (let alone touches) this environment's packages.
    purelib = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                           text=True).strip())
    ours = [p for p in site.getsitepackages() if Path(p).resolve() != purelib.resolve()] if sys.prefix != \
        sys.base_prefix else []
    (purelib / "_gauntlet_test_dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    return venv


def _clean_env() -> dict:
    """No route back to the checkout: no PYTHONPATH, no user site, no search-path setting of the outer run."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS") and not k.startswith("GAUNTLET_")}
    return dict(env, PYTHONNOUSERSITE="1")


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _listed_solutions(listing: str, problem: str) -> list[str]:
    block = listing.split(f"\n{problem}: ")[1].splitlines()[1:]
    block = block[:next((i for i, line in enumerate(block) if not line.startswith(" ")), len(block))]
    return [line.split()[1] for line in block if line.startswith("  - ")]


def test_the_wheel_holds_every_harness_file_and_the_shipped_problems(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {str(p.relative_to(CHECKOUT)) for pkg in ("harness", "reports") for p in (CHECKOUT / pkg).rglob("*.py")
                if "__pycache__" not in p.parts}
    expected |= {str(p.relative_to(CHECKOUT)) for p in (CHECKOUT / "harness" / "schemas").glob("*.json")}
    expected |= {str(p.relative_to(CHECKOUT)) for p in (CHECKOUT / "reports" / "templates").iterdir()}
    mapped = {"problems": "gauntlet_problems", "solutions": "gauntlet_solutions"}
    for folder, target in mapped.items():
        expected |= {f"{target}/{p.relative_to(CHECKOUT / folder)}" for p in (CHECKOUT / folder).glob("*/*")
                     if p.is_file() and p.suffix in (".py", ".yaml", ".md")}
    missing = sorted(expected - names)
    assert not missing, f"the wheel lacks {missing[:10]} (a new package under harness/ must be listed in pyproject)"
    assert not [n for n in names if n.startswith(("tests/", "problems/", "solutions/"))]


def test_installed_gauntlet_works_in_a_project_outside_the_checkout(fresh_venv, tmp_path):
    project = _make_project(tmp_path / "project")
    env, bin_ = _clean_env(), fresh_venv / "bin"
    code, out = _run([bin_ / "python", "-c", "import harness; print(harness.__file__)"], project, env)
    assert code == 0 and out.startswith(str(fresh_venv)), out          # the wheel's harness, not the checkout's
    installed = _tree(fresh_venv / "lib")

    code, out = _run([bin_ / "gauntlet", "list"], project, env)
    assert code == 0, out
    # The leaderboard page's template and stylesheet load from the installed package (package data), not the
    # checkout; in Python rather than `gauntlet report`, to spare a process that imports torch.
    code, said = _run([bin_ / "python", "-c", "import sys, reports.page as p; from reports.leaderboard import build; "
                       "print(p.__file__, build(sys.argv[1:2], sys.argv[2])['html'])",
                       CHECKOUT / "tests/data/h100_triton_tiled_1.json", tmp_path / "board"], project, env)
    assert code == 0 and any(line.startswith(str(fresh_venv)) for line in said.splitlines() if "page.py" in line), said
    assert "<table class=\"grid\">" in (tmp_path / "board" / "leaderboard.html").read_text()
    assert "\ngemm: " in out and "\nbmm: " in out                        # shipped, from package data
    assert "\nscale_add: " in out and str(project / "kernels/problems/scale_add") in out
    assert _listed_solutions(out, "scale_add") == ["fused", "wrong_sign"]      # _eager is a baseline only

    code, out = _run([bin_ / "gauntlet", "eval", "gemm", "my_gemm.py", "--no-timing", "--device", "cpu",
                      "--dtype", "float32", "--examples", "2"], project, env)
    assert code == 0 and "gemm / my_gemm [torch] on cpu: PASS" in out, out

    code, out = _run([bin_ / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--gauntlet-examples", "2"],
                     project, env)
    assert code == 1, out                                                # the wrong kernel fails the session
    assert "1 failed, 1 passed" in out and "scale_add/wrong_sign[float32]" in out and "[mismatch]" in out, out

    assert (project / ".gauntlet" / "failures" / "scale_add").is_dir()    # state lives in the user's project
    assert _tree(fresh_venv / "lib") == installed                       # and never beside the installed package


def test_the_plugin_judges_a_users_repository_and_a_hand_written_test_finds_its_problem(pytester):
    """In this environment too (pytester, in-process): collected from [tool.gauntlet], and the search path is in
    force for the session, so a test calling discover + evaluate judges the user's problem."""
    _make_project(pytester.path, {k: v for k, v in PROJECT.items() if "wrong_sign" not in k})
    (pytester.path / "test_by_hand.py").write_text(textwrap.dedent("""
        from harness import discover
        from harness.judge.evaluate import Options, evaluate


        def test_my_kernel_by_hand():
            problem = discover.get_problem("scale_add")
            record = evaluate(problem, discover.get_solution("scale_add", "fused"),
                              Options(device="cpu", case="N=7,seed=1"))
            assert record.verdict == "pass", record.reasons
        """))
    before = discover.use(None)          # what is in force in this session (put back at once)
    discover.use(before)
    # As conftest.py does: the entry point loads the plugin where the package is installed, else -p does.
    installed = any(ep.name == "gauntlet" for ep in metadata.entry_points(group="pytest11"))
    # The plugin's own judgement of fused.py is run in the fresh venv above; here it is collected (and deselected,
    # to spare a process start) beside the hand-written test, which runs.
    result = pytester.runpytest("-p", "no:cacheprovider", "-v", "-k", "by_hand",
                                *([] if installed else ["-p", "harness.plugin"]))
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*collected 2 items / 1 deselected / 1 selected", "*test_by_hand.py*PASSED*"])
    assert discover.use(before) is before          # the session gave the search path back
