"""Skips for tests that need what a machine may lack, each with its reason (the product reports the same lack as
`unsupported`, never as a failure of the candidate)."""
import pytest

from harness import backends

# Triton kernels judged on the CPU run under Triton's interpreter, which Triton <= 3.6 cannot run with numpy >= 2.4
# (the H100 runner's numpy 2.5): harness.backends.interpreter_broken says why.
triton_cpu = pytest.mark.skipif(bool(backends.interpreter_broken()),
                                reason=backends.interpreter_broken() or "Triton's CPU interpreter runs here")


def skip_unless_triton_cpu_for(path) -> None:
    """Inside a test: skip when `path` is a Triton kernel and the CPU interpreter cannot run here."""
    from harness import discover
    if backends.interpreter_broken() and discover.read_solution(path).backend == "triton":
        pytest.skip(backends.interpreter_broken())


def schema_problems(doc: dict, kind: str) -> list:
    """reports.schema.problems, or a skip where jsonschema (a [test] extra) is not installed: a runner judging on
    what it has (no package network) may lack it; the README's test command installs it."""
    pytest.importorskip("jsonschema", reason="jsonschema is not installed (pip install 'gauntlet[test]')")
    from reports import schema
    return schema.problems(doc, kind)
