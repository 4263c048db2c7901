"""Gauntlet works outside its checkout, installed as a user installs it. A wheel built from the repository carries
one import package, `gauntlet` (the harness, the reports and the shipped problems and solutions inside it); the
README's "Use it in your own repository" recipe, run line by line in a fresh virtualenv that has nothing but torch
(no system site-packages, the rest from the package index as pip resolves the dependencies, the Triton extra
included), installs from the README's git URL pointed at a copy of this checkout (no hand-built wheel), and judges a
user's own problem and kernels, a Triton kernel among them, with pytest, including a problem whose baseline is a
shipped solution; nothing is written beside the installed package.

The fresh virtualenv is made once per module (torch's install is most of this file's time) and skipped, with the
reason, only when the package index cannot be reached. The wheel of the layout test is built offline, with this
interpreter's setuptools (--no-build-isolation).
"""
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from gauntlet import discover

pytest_plugins = ["pytester"]

CHECKOUT = Path(__file__).resolve().parents[1]
SHIPPED = ("pyproject.toml", "README.md", "harness", "reports", "problems", "solutions")

# A user's project (judged in this environment, through pytester): its own problem, a baseline kept private
# (_eager.py: not judged itself), a kernel that is right and one that is wrong.
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
}


# The README's Triton kernel (its contract example), judged on the CPU by Triton's interpreter: the extra works.
TRITON_MM = """
    import torch
    import triton
    import triton.language as tl

    BACKEND = "triton"


    @triton.jit
    def _mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            k = k0 + rk
            x = tl.load(a + rm[:, None] * sam + k[None, :] * sak, mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
            y = tl.load(b + k[:, None] * sbk + rn[None, :] * sbn, mask=(k[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(x, y)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty), mask=mask)


    def solve(a, b):
        (M, K), N = a.shape, b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        _mm[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM=64, BN=64, BK=32)
        return c
    """


# The fresh virtualenv's project: the README's recipe adds [tool.gauntlet] to this pyproject.toml. Its own problem
# takes the shipped cuBLAS solution as its baseline (gemm/torch_matmul); one kernel splits K in two (right), one
# drops the last K column (wrong). No kernel for a shipped problem: a gemm judgement would double this test's judging
# time, and test_searchpath.py checks that such a kernel joins the shipped problem's solutions.
RECIPE_PROJECT = {
    "pyproject.toml": """
        [project]
        name = "my-kernels"
        version = "0"
        """,
    "kernels/problems/my_mm/problem.yaml": """
        id: my_mm
        title: C = A @ B at my model's sizes
        dims: [M, N, K]
        dtypes:
          float32: {torch: float32, k_norm: 8, k_elem: 0, floor: 64}
        fuzz:
          cpu: {M: [1, 48], N: [1, 48], K: [1, 80]}
        benchmark:
          - {M: 4096, N: 4096, K: 4096, source: "square 4096^3"}
        baselines:
          cublas: gemm/torch_matmul
        flops: "2 * M * N * K"
        bytes: "(M * K + K * N) * bytes_in + M * N * bytes_out"
        """,
    "kernels/problems/my_mm/reference.py": """
        import torch


        def make_inputs(shape, dtype, seed, device):
            g = torch.Generator(device=device).manual_seed(seed)
            a = torch.randn(shape["M"], shape["K"], generator=g, device=device)
            b = torch.randn(shape["K"], shape["N"], generator=g, device=device)
            return a.to(dtype), b.to(dtype)


        def reference(a, b):
            return a @ b


        def error_scale(a, b):
            return ((a * a) @ (b * b)).sqrt()
        """,
    "kernels/solutions/my_mm/split_k.py": """
        BACKEND = "torch"


        def solve(a, b):
            h = a.shape[1] // 2
            return a[:, :h] @ b[:h] + a[:, h:] @ b[h:]
        """,
    "kernels/solutions/my_mm/triton_mm.py": TRITON_MM,
    "kernels/solutions/my_mm/drops_k_tail.py": """
        BACKEND = "torch"


        def solve(a, b):
            return a[:, :-1] @ b[:-1]
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


def _recipe() -> list[str]:
    """The command lines of the README's "Use it in your own repository" recipe, as a user would copy them."""
    text = (CHECKOUT / "README.md").read_text()
    section = text.split("\n## Use it in your own repository\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def _index_unreachable() -> str | None:
    """Why the package index cannot be reached (None when it can): the one reason to skip, not to fail."""
    url = os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple/"
    try:
        urllib.request.urlopen(url.rstrip("/") + "/pyyaml/", timeout=15).close()
    except (OSError, ValueError) as exc:
        return f"the package index {url} is unreachable ({exc}); this test installs Gauntlet's dependencies from it"
    return None


def _install(pip: Path, *args, cwd: Path) -> None:
    code, out = _run([pip, "install", "-q", "--disable-pip-version-check", *args], cwd, _clean_env(), timeout=900)
    if code != 0:
        why = _index_unreachable()
        if why:
            pytest.skip(why)
        raise AssertionError(f"pip install {' '.join(map(str, args))} failed:\n{out}")


@pytest.fixture(scope="module")
def recipe_venv(tmp_path_factory) -> Path:
    """A fresh virtualenv of the base interpreter (not this one, whose editable install points at the checkout),
    without system site-packages, holding torch alone (GAUNTLET_TORCH, default torch==2.13.0, as bootstrap.sh
    installs it): the README's starting point."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    base = Path(getattr(sys, "_base_executable", "") or Path(sys.base_prefix) / "bin" / "python3")
    code, out = _run([base, "-m", "venv", venv], cwd=venv.parent, env=_clean_env())
    assert code == 0, out
    _install(venv / "bin" / "pip", os.environ.get("GAUNTLET_TORCH", "torch==2.13.0"), cwd=venv.parent)
    return venv


def _clean_env(venv: Path | None = None) -> dict:
    """No route back to the checkout: no PYTHONPATH, no user site, no search-path setting of the outer run; with a
    venv, its bin/ first on PATH, as `source bin/activate` would put it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "VIRTUAL_ENV")
           and not k.startswith(("GAUNTLET_", "PYTEST_XDIST"))}
    if venv is not None:
        env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    return dict(env, PYTHONNOUSERSITE="1")


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _listed_solutions(listing: str, problem: str) -> list[str]:
    block = listing.split(f"\n{problem}: ")[1].splitlines()[1:]
    block = block[:next((i for i, line in enumerate(block) if not line.startswith(" ")), len(block))]
    return [line.split()[1] for line in block if line.startswith("  - ")]


def test_the_wheel_holds_every_harness_file_and_the_shipped_problems(wheel):
    """One import name: harness/ is `gauntlet`, reports/ `gauntlet.reports`, the shipped problems and solutions
    package data inside it; nothing else at the top of site-packages (a user's own `reports` or another tool's
    `harness` must not collide with ours)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    where = {"harness": "gauntlet", "reports": "gauntlet/reports", "problems": "gauntlet/problems",
             "solutions": "gauntlet/solutions"}
    expected = {f"{where[pkg]}/{p.relative_to(CHECKOUT / pkg)}" for pkg in ("harness", "reports")
                for p in (CHECKOUT / pkg).rglob("*.py") if "__pycache__" not in p.parts}
    expected |= {f"gauntlet/schemas/{p.name}" for p in (CHECKOUT / "harness" / "schemas").glob("*.json")}
    expected |= {f"gauntlet/reports/templates/{p.name}" for p in (CHECKOUT / "reports" / "templates").iterdir()}
    for folder in ("problems", "solutions"):
        expected |= {f"{where[folder]}/{p.relative_to(CHECKOUT / folder)}" for p in (CHECKOUT / folder).glob("*/*")
                     if p.is_file() and p.suffix in (".py", ".yaml", ".md")}
    missing = sorted(expected - names)
    assert not missing, f"the wheel lacks {missing[:10]} (a new package under harness/ must be listed in pyproject)"
    tops = {n.split("/")[0] for n in names}
    assert tops == {"gauntlet", next(n for n in tops if n.endswith(".dist-info"))}, sorted(tops)


def _sources(dest: Path) -> Path:
    """A copy of what a clone of the repository holds for an install (no build leftovers, no venv)."""
    for name in SHIPPED:
        source = CHECKOUT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "out"))
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def test_the_readme_recipe_judges_a_users_problem_in_a_fresh_venv_with_only_torch(recipe_venv, tmp_path):
    project = _make_project(tmp_path / "project", RECIPE_PROJECT)
    install, configure, judge = _recipe()
    url = "git+https://github.com/OWNER/gauntlet"
    assert url in install and "[triton]" in install, install
    install = install.replace(url, f"file://{_sources(tmp_path / 'gauntlet-src')}")
    env = _clean_env(recipe_venv)

    # Line 1: the package and its dependencies from the index (numpy among them: the harness's wire needs it), the
    # Triton extra too, built from the sources as pip builds a git URL: no wheel made by hand.
    code, out = _run(["bash", "-c", install], project, env, timeout=900)
    if code != 0 and _index_unreachable():
        pytest.skip(_index_unreachable())
    assert code == 0, out
    code, out = _run([recipe_venv / "bin" / "python", "-c", "import gauntlet, numpy, hypothesis, yaml, pytest, triton; "
                      "print(gauntlet.__file__)"], project, env)
    assert code == 0 and out.startswith(str(recipe_venv)), out            # the installed package, not the checkout
    installed = _tree(recipe_venv / "lib")
    # The leaderboard page's template and stylesheet load from the installed package (package data), not the
    # checkout; in Python rather than `gauntlet report`, to spare a process that imports torch.
    board = project / "board"
    code, said = _run([recipe_venv / "bin" / "python", "-c", "import sys, gauntlet.reports.page as p; "
                       "from gauntlet.reports.leaderboard import build; "
                       "print(p.__file__, build(sys.argv[1:2], sys.argv[2])['html'])",
                       CHECKOUT / "tests/data/h100_triton_tiled_1.json", board], project, env)
    assert code == 0 and any(line.startswith(str(recipe_venv)) for line in said.splitlines() if "page.py" in line), said
    assert "<table class=\"grid\">" in (board / "leaderboard.html").read_text()

    # Line 2: the search path.
    code, out = _run(["bash", "-c", configure], project, env)
    assert code == 0 and "[tool.gauntlet]" in (project / "pyproject.toml").read_text(), out

    # Line 3: pytest judges the user's two kernels for their own problem, whose baseline is the shipped cuBLAS
    # solution.
    assert judge.split()[0] == "pytest"
    code, out = _run(["bash", "-c", judge], project, env, timeout=600)
    assert code == 1, out                                                 # the wrong kernel fails the session
    assert "1 failed, 2 passed" in out, out
    assert "FAILED kernels/solutions/my_mm/drops_k_tail.py::my_mm/drops_k_tail[float32]" in out, out
    assert "[mismatch]" in out and "replay: gauntlet eval my_mm " in out, out
    assert (project / ".gauntlet" / "failures" / "my_mm").is_dir()       # state lives in the user's project

    code, listing = _run([recipe_venv / "bin" / "gauntlet", "list"], project, env)
    assert code == 0, listing
    assert "\nbmm: " in listing and str(project / "kernels/problems/my_mm") in listing  # shipped, and the user's
    assert _listed_solutions(listing, "my_mm") == ["drops_k_tail", "split_k", "triton_mm"]
    assert "triton_tiled" in _listed_solutions(listing, "gemm")
    assert _tree(recipe_venv / "lib") == installed                        # nothing written beside the package


def test_the_plugin_judges_a_users_repository_and_a_hand_written_test_finds_its_problem(pytester):
    """In this environment too (pytester, in-process): collected from [tool.gauntlet], and the search path is in
    force for the session, so a test calling discover + evaluate judges the user's problem."""
    _make_project(pytester.path, {k: v for k, v in PROJECT.items() if "wrong_sign" not in k})
    (pytester.path / "test_by_hand.py").write_text(textwrap.dedent("""
        from gauntlet import discover
        from gauntlet.judge.evaluate import Options, evaluate


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
                                *([] if installed else ["-p", "gauntlet.plugin"]))
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*collected 2 items / 1 deselected / 1 selected", "*test_by_hand.py*PASSED*"])
    assert discover.use(before) is before          # the session gave the search path back
