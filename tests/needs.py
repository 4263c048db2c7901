"""Skips for tests that need what a machine may lack, each with its reason (the product reports the same lack as
`unsupported`, never as a failure of the candidate); and what a nested pytest needs where Gauntlet is not installed."""
import functools
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gauntlet import backends

# Triton kernels judged on the CPU run under Triton's interpreter, which Triton <= 3.6 cannot run with numpy >= 2.4
# (the H100 runner's numpy 2.5): gauntlet.backends.interpreter_broken says why.
triton_cpu = pytest.mark.skipif(bool(backends.interpreter_broken()),
                                reason=backends.interpreter_broken() or "Triton's CPU interpreter runs here")


def load_for_interpreter(relpath: str, name: str):
    """The checkout's file `relpath` imported as module `name` with TRITON_INTERPRET=1 set while it loads, so its
    kernels are compiled for Triton's CPU interpreter (triton.jit picks at decoration time); the variable is restored
    afterwards, so the rest of a pytest session (a GPU run included) is not switched to the interpreter."""
    import importlib.util
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / relpath)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if saved is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = saved
    return mod


@pytest.fixture
def interpreter_patches(monkeypatch):
    """The harness's interpreter patches (exact low-precision dots and fp8 casts), installed as a Triton solution's
    worker installs them on the CPU, and removed afterwards. A test module takes it with
    `from tests.needs import interpreter_patches`."""
    from gauntlet.backends import triton_interpreter
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_interpreter.patch_interpreter(), triton_interpreter.unsupported_internals()
    yield
    triton_interpreter.unpatch_interpreter()


def skip_unless_triton_cpu_for(path) -> None:
    """Inside a test: skip when `path` is a Triton kernel and the CPU interpreter cannot run here."""
    from gauntlet import discover
    if backends.interpreter_broken() and discover.read_solution(path).backend == "triton":
        pytest.skip(backends.interpreter_broken())


def schema_problems(doc: dict, kind: str) -> list:
    """gauntlet.reports.schema.problems, or a skip where jsonschema (a [test] extra) is not installed: a runner judging
    on what it has (no package network) may lack it; the README's test command installs it."""
    pytest.importorskip("jsonschema", reason="jsonschema is not installed (pip install 'gauntlet[test]')")
    from gauntlet.reports import schema
    return schema.problems(doc, kind)


CHECKOUT = Path(__file__).resolve().parents[1]


@functools.cache
def _sees_plugin(pythonpath: str) -> bool:
    """Whether a pytest started outside the checkout, with this PYTHONPATH, finds the plugin's pytest11 entry
    point (the installed package's, or the metadata of an editable install in the checkout)."""
    code = "from importlib import metadata; print(any(e.name == 'gauntlet' for e in metadata.entry_points(group='pytest11')))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([sys.executable, "-c", code], cwd=tempfile.gettempdir(), env=env, capture_output=True,
                         text=True)
    return out.stdout.strip() == "True"


def plugin_env(env: dict) -> dict:
    """`env` for a pytest run in a user's project. Where the package is not installed (a GPU runner without a
    package network runs the suite from its checkout), the plugin is loaded as its entry point would load it: the
    checkout importable, and PYTEST_PLUGINS where no entry point is visible even so. So the test still tests it."""
    if _sees_plugin(env.get("PYTHONPATH", "")):
        return env
    path = os.pathsep.join(filter(None, [str(CHECKOUT), env.get("PYTHONPATH", "")]))
    env = dict(env, PYTHONPATH=path)
    return env if _sees_plugin(path) else dict(env, PYTEST_PLUGINS="gauntlet.plugin")


def ctrl_c_default() -> None:
    """A Popen preexec_fn: the child starts as from a terminal, SIGINT at its default disposition. A shell's
    background job (`cmd &`, nohup) starts with SIGINT ignored, which a child inherits, and Python then installs no
    KeyboardInterrupt handler, rightly: so a test of what Ctrl-C does, run in such a job, would wait for nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def scratch_env(copy: Path, env: dict | None = None) -> dict:
    """`env` for a `gauntlet` process that runs a scratch copy of the checkout (`copy`) as the package, not the
    installed one: a tamper fixture then writes into the copy, whose own judge watches the copy's tree. The copy's
    harness/ becomes `gauntlet` through a folder put first on PYTHONPATH (ahead of the editable install's finder,
    which the interpreter consults after its path), and its reports/ `gauntlet.reports` through a link inside it, as
    a wheel lays them out. Workers keep PYTHONPATH (gauntlet.judge.process.isolate), so they run the copy too."""
    site = copy / ".scratch-site"
    site.mkdir(exist_ok=True)
    if not (site / "gauntlet").exists():
        (site / "gauntlet").symlink_to(copy / "harness", target_is_directory=True)
    if not (copy / "harness" / "reports").exists():
        (copy / "harness" / "reports").symlink_to(copy / "reports", target_is_directory=True)
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    return env
