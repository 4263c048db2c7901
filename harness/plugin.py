"""pytest plugin: one test per problem x solution x dtype, judged by the same core as `gauntlet eval`.

Collected from <solutions folder>/<problem>/<name>.py for every solutions folder on the search path
(gauntlet.searchpath: GAUNTLET_PROBLEMS / GAUNTLET_SOLUTIONS, else [tool.gauntlet] in the pyproject.toml at or above
pytest's rootdir, then the shipped ones), so a kernel team's own repository is judged where it lies: pytest would
otherwise ignore these files, they are not test_*.py. The search path is in force for the whole session, so a
hand-written test there that calls gauntlet.discover finds the same problems. What this machine cannot run is
skipped with the reason (a CuPy kernel on a CPU-only runner, a dtype outside the solution's DTYPES); anything else
that is not a pass fails with the reason codes and the replay command.

Ctrl-C is pytest's: the plugin installs no signal handler, so the KeyboardInterrupt reaches pytest, which prints
its interrupt summary; on the way the worker in flight, and whatever it started, is killed at once instead of being
asked to exit (gauntlet.judge.process.isolate.Child.close).
"""
from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import discover, searchpath
from .executors import slots


def _gpu_count() -> int:
    """From nvidia-smi, not torch: initialising CUDA here would tie this worker to the default device."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


def _xdist_worker(environ) -> tuple[int | None, int]:
    """(this pytest-xdist worker's index, the workers' count), or (None, 1) outside an xdist worker."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if not (worker.startswith("gw") and worker[2:].isdigit()):
        return None, 1
    try:
        return int(worker[2:]), max(1, int(environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return int(worker[2:]), 1


def pin_xdist_worker(environ=os.environ, gpu_count=_gpu_count) -> None:
    """`pytest -n N` on a machine of several GPUs: worker gwI gets one GPU of its own (of those CUDA_VISIBLE_DEVICES
    lets it see, else of all), round-robin, before anything starts CUDA; and where several workers share a GPU,
    GAUNTLET_JUDGES_PER_GPU says how many (each judge then takes its share of the card's memory:
    gauntlet.judge.values.memory), unless it is set already. Runs when the plugin is imported, in every xdist worker:
    from the installed package, so a user's repository gets it too, not only this checkout (its conftest.py is not
    shipped)."""
    index, workers = _xdist_worker(environ)
    if index is None:
        return
    devices = slots.visible_devices(environ, gpu_count)
    if not devices:
        return
    environ["CUDA_VISIBLE_DEVICES"] = slots.slot_device(index, devices)   # the rule `--gpus` uses too
    environ.setdefault("GAUNTLET_JUDGES_PER_GPU", str(-(-workers // len(devices))))


def share_cpu_threads(environ=os.environ, cores=os.cpu_count) -> None:
    """`pytest -n N`: each xdist worker gets its share of the host's cores for torch's (OpenMP's) CPU threads, unless
    OMP_NUM_THREADS is set already; the judges and candidate workers it starts inherit it. Without a share every
    worker's torch spins one thread per core, the host's cores oversubscribed as many times as there are workers, and
    a CPU test takes tens of times as long (docs/benchmarks.md, "The test suite")."""
    index, workers = _xdist_worker(environ)
    if index is None or environ.get("OMP_NUM_THREADS"):
        return
    share = max(1, (cores() or 1) // workers)
    environ["OMP_NUM_THREADS"] = str(share)
    torch = sys.modules.get("torch")             # imported already (another plugin): its pool is sized by now
    if environ is os.environ and torch is not None:
        torch.set_num_threads(share)


pin_xdist_worker()
share_cpu_threads()

_PREVIOUS = pytest.StashKey()
_FOLDERS = pytest.StashKey()      # solutions/<problem>/ folder -> problem id, found once per session


def pytest_addoption(parser):
    group = parser.getgroup("gauntlet")
    group.addoption("--gauntlet-device", choices=("cpu", "cuda"), help="default: cuda if present, else cpu")
    group.addoption("--gauntlet-examples", type=int, default=None,
                    help="Hypothesis examples per dtype, after the domain's edge cases (default 1 on cpu, "
                         "40 on cuda)")
    group.addoption("--gauntlet-seed", type=int, default=None, help="fix the fuzzing seed")
    group.addoption("--gauntlet-timing", action="store_true", help="also time on cuda (slower; default off)")
    group.addoption("--gauntlet-sandbox", choices=("require", "auto", "off"), default="auto",
                    help="OS confinement of the workers (default auto: what the kernel offers, recorded)")
    group.addoption("--gauntlet-out", metavar="PATH", default=None,
                    help="write this session's records to PATH as a results file (one record per problem x "
                         "solution, as `gauntlet run --out` writes; `gauntlet report` and `gauntlet compare` read it)")
    group.addoption("--gauntlet-compare", metavar="BASE", default=None,
                    help="after the session, compare its records with the results file BASE (as `gauntlet compare "
                         "BASE NEW`), print the Markdown and fail the session on a regression: a pass that is no "
                         "longer one, or a slowdown beyond --gauntlet-fail-on whose interval says it is real")
    group.addoption("--gauntlet-fail-on", metavar="PCT", type=float, default=5.0,
                    help="the slowdown, in percent, that --gauntlet-compare fails on (default 5)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gauntlet: a problem x solution x dtype judgement collected by the plugin")
    try:
        found = searchpath.resolve(start=config.rootpath)
    except searchpath.SearchPathError as exc:
        raise pytest.UsageError(f"gauntlet: {exc}") from None
    config.stash[_PREVIOUS] = discover.use(found)
    from .judge import sandbox
    try:
        sandbox.check_mode(config.getoption("--gauntlet-sandbox", "auto"))
    except sandbox.Unavailable as exc:
        raise pytest.UsageError(f"gauntlet: {exc}") from None
    _configure_gate(config)
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(EarlyReasons(config), "gauntlet-early-reasons")


class EarlyReasons:
    """A failed judgement's reasons are printed when it fails, not only in pytest's summary at the end: a GPU CI job
    stopped at its time limit prints no summary, and the reasons of a failure it saw would be lost with it. In the
    controller only (under pytest-xdist the workers' reports come to it)."""

    def __init__(self, config):
        self.config = config

    def pytest_runtest_logreport(self, report):
        if report.when != "call" or not report.failed or "gauntlet" not in report.keywords:
            return
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.ensure_newline()
            tr.write_line(f"gauntlet: {report.nodeid}: {report.longreprtext}", red=True)


def _configure_gate(config) -> None:
    """--gauntlet-out / --gauntlet-compare: checked before anything is judged, so a typo in a CI job costs seconds.
    The controller gathers the records and compares; under pytest-xdist the workers only judge."""
    out, base = config.getoption("--gauntlet-out", None), config.getoption("--gauntlet-compare", None)
    fail_on = config.getoption("--gauntlet-fail-on", 5.0)
    if not 0 <= fail_on < 1000:
        raise pytest.UsageError(f"gauntlet: --gauntlet-fail-on must be a percentage in [0, 1000), got {fail_on}")
    if not (out or base) or hasattr(config, "workerinput"):
        return
    from .judge.records import gate
    try:
        stored = gate.load_base(Path(base)) if base else None
    except gate.GateError as exc:
        raise pytest.UsageError(f"gauntlet: --gauntlet-compare: {exc}") from None
    config.pluginmanager.register(SessionGate(out, base, stored, fail_on), "gauntlet-gate")


class SessionGate:
    """This session's records, from each item's report (`user_properties`, which pytest-xdist carries back to the
    controller), written out and compared at the end (gauntlet.judge.records.gate)."""

    def __init__(self, out, base_name, base, fail_on):
        self.out = Path(out) if out else None
        self.base_name, self.base, self.fail_on = base_name, base, fail_on
        self.records: list[dict] = []
        self.doc = None

    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            self.records += [value for name, value in report.user_properties if name == "gauntlet"]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        """Before the terminal summary (which prints the Markdown); a regression turns a passing session's exit
        status into 1 (tests failed), and leaves any worse status as it is."""
        from .judge.records import gate
        if self.out:
            gate.write(self.out, self.records)
        if self.base is None:
            return
        self.doc = gate.check(self.base, self.base_name, self.records, self.fail_on, self.out)
        if self.doc["regressions"] and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        if self.doc is None:
            return
        count = len(self.doc["regressions"])
        terminalreporter.write_sep("=", f"gauntlet compare: {count} regression(s)", red=bool(count), green=not count)
        terminalreporter.write_line(self.doc["markdown"].rstrip())


def pytest_unconfigure(config):
    if _PREVIOUS in config.stash:
        discover.use(config.stash[_PREVIOUS])


def pytest_collection_finish(session):
    """Each of the user's problems with no solution file is said (pytest would collect nothing for it, silently),
    with the file to add, and the problem's own error where it does not load either. In the controller only."""
    if hasattr(session.config, "workerinput"):
        return
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in _without_solutions():
        if tr is not None:
            tr.write_line(line, yellow=True)


def _without_solutions() -> list[str]:
    sp = discover.search_path()
    lines = []
    for pid, located in discover.locate_problems(sp).items():
        if located.shipped or discover.solutions_for(pid, sp):
            continue
        where = sp.solutions[0] / pid if sp.solutions else located.folder.parent.parent / "solutions" / pid
        line = f"gauntlet: problem {pid!r} ({located.folder}) has no solutions to judge: add {where}/NAME.py"
        try:
            discover.get_problem(pid, sp)
        except (discover.ProblemError, discover.SearchPathError) as exc:
            line += f"; the problem itself does not load: {exc}"
        lines.append(line)
    return lines


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix != ".py" or file_path.name.startswith("_"):
        return None
    if file_path.parent.resolve() not in _solution_folders(parent.config):
        return None
    return SolutionFile.from_parent(parent, path=file_path)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    """A solution file named on the command line (`pytest solutions/gemm/mine.py`) is not a test module: pytest's
    python plugin would import it, running candidate code unconfined in the pytest process, and two solutions of
    the same file name in two problems' folders would be an "import file mismatch" collection error. Its judgements
    come from SolutionFile alone."""
    if module_path.parent.resolve() not in _solution_folders(parent.config):
        return None
    if any(fnmatch.fnmatch(module_path.name, pattern) for pattern in parent.config.getini("python_files")):
        return None             # a test module by its name (python_files): collected as pytest always would
    return _NotATestModule.from_parent(parent, path=module_path)


class _NotATestModule(pytest.File):
    def collect(self):
        return []


def _solution_folders(config) -> dict:
    if _FOLDERS not in config.stash:
        config.stash[_FOLDERS] = {folder: pid for pid in discover.problem_ids()
                                  for folder in discover.solution_folders(pid)}
    return config.stash[_FOLDERS]


class SolutionFile(pytest.File):
    def collect(self):
        try:
            problem = discover.get_problem(self.path.parent.name)
        except (discover.ProblemError, discover.SearchPathError) as exc:
            # The problem author's (or the search path's) error, not the kernel's: one failing item per solution file,
            # said in one line without a traceback through the harness. Not a collection error: pytest stops the
            # whole session on one ("Interrupted: 1 error during collection"), and one broken problem must not keep
            # every other problem's kernels from being judged.
            yield BrokenProblem.from_parent(self, name=f"{self.path.parent.name}/{self.path.stem}[problem]",
                                            why=f"gauntlet: the problem, not this kernel, is at fault: {exc}")
            return
        solution = discover.read_solution(self.path.resolve(), problem.id)
        if solution.dtypes is not None and not set(solution.dtypes) & set(problem.dtypes):
            # No dtype to judge: one item, judged on every dtype, which fails as nothing_judged, rather than one
            # skip per dtype (all-skipped reads as fine in CI and in a search loop).
            yield JudgeItem.from_parent(self, name=f"{problem.id}/{solution.name}[no dtype]", problem=problem,
                                        solution=solution, dtype=None)
            return
        for dtype in problem.dtypes:
            yield JudgeItem.from_parent(self, name=f"{problem.id}/{solution.name}[{dtype}]", problem=problem,
                                        solution=solution, dtype=dtype)


class JudgeItem(pytest.Item):
    def __init__(self, *, problem, solution, dtype, **kw):
        super().__init__(**kw)
        self.problem, self.solution, self.dtype = problem, solution, dtype
        self.add_marker(pytest.mark.gauntlet)
        self.record = None

    def runtest(self):
        from . import backends
        from .judge.evaluate import Options, evaluate
        if self.dtype is not None and self.solution.dtypes is not None and self.dtype not in self.solution.dtypes:
            pytest.skip(f"{self.dtype} is not in the solution's DTYPES {self.solution.dtypes}")
        cfg = self.config
        device = cfg.getoption("--gauntlet-device") or backends.default_device()
        ok, why = backends.status(self.solution.backend, device)
        if not ok and self.solution.backend in discover.BACKENDS:
            pytest.skip(f"{self.solution.backend} on {device}: {why}")
        # On the CPU the interpreter is slow and the domain's edges (up to 10 cases, always judged first, the aligned
        # all-dims case among them) carry most of what a CPU judgement can find; 1 random draw follows them, a fresh
        # one every run (CI's 15-minute budget on 2 cores: 2 draws take the suite past it; docs/benchmarks.md,
        # "Figures moved from docstrings").
        examples = cfg.getoption("--gauntlet-examples") or (1 if device == "cpu" else 40)
        opts = Options(device=device, dtypes=(self.dtype,) if self.dtype else None, examples=examples,
                       seed=cfg.getoption("--gauntlet-seed"), timing=cfg.getoption("--gauntlet-timing"),
                       sandbox=cfg.getoption("--gauntlet-sandbox"))
        self.record = evaluate(self.problem, self.solution, opts)
        self.user_properties.append(("gauntlet", self.record.to_json()))
        if self.record.verdict == "unsupported":
            pytest.skip("; ".join(r["detail"] for r in self.record.reasons))
        if self.record.verdict != "pass":
            raise JudgeFailed(self.record)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, JudgeFailed):
            r = excinfo.value.record
            lines = [f"{r.problem}/{r.solution} [{r.backend}] on {r.device}: {r.verdict.upper()} (seed {r.seed})"]
            for reason in r.reasons:
                lines.append(f"  [{reason['code']}] {reason['detail']}")
                if reason.get("repro"):
                    lines.append(f"    replay: {reason['repro']}")
            return "\n".join(lines)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, self.name


class BrokenProblem(pytest.Item):
    """A solution of a problem that does not load: fails with the problem's error (file and key), and nothing else."""

    def __init__(self, *, why, **kw):
        super().__init__(**kw)
        self.why = why
        self.add_marker(pytest.mark.gauntlet)

    def runtest(self):
        raise ProblemBroken(self.why)

    def repr_failure(self, excinfo, style=None):
        return str(excinfo.value) if isinstance(excinfo.value, ProblemBroken) else super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, self.name


class ProblemBroken(Exception):
    pass


class JudgeFailed(Exception):
    def __init__(self, record):
        super().__init__(record.verdict)
        self.record = record
