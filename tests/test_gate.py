"""The plugin's regression gate: `pytest --gauntlet-compare BASE [--gauntlet-fail-on PCT] [--gauntlet-out NEW]`
(gauntlet.plugin.SessionGate, gauntlet.judge.records.gate). A session's records are merged per solution, compared with
the stored file as `gauntlet compare` compares, printed as Markdown, and a regression fails the session.

Timings need a GPU, so the timed records are planted: the real H100 records of tests/data (test_compare.py), put
into a session by a test that hands them to the plugin as a judged item does (`user_properties`). The verdict
change is also judged for real, on the CPU, in a user's project."""
import copy
import json
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
import torch  # noqa: F401 - loaded before pytester's in-process sessions, which drop the modules they import, and
#               a C extension such as torch's cannot be imported a second time into one process

from gauntlet.judge.records import gate
from gauntlet.reports import compare
from tests import needs
from tests.test_compare import REAL, _record, _slowed
from tests.test_install import PROJECT, _make_project

pytest_plugins = ["pytester"]

# The plugin comes from the package's entry point where it is installed, else (a plain checkout) from -p.
PLUGIN = [] if any(ep.name == "gauntlet" for ep in metadata.entry_points(group="pytest11")) else ["-p",
                                                                                                  "gauntlet.plugin"]

PLANT = """
    import json
    import pytest

    RECORDS = json.loads(open("planted.json").read())


    @pytest.mark.parametrize("i", range(len(RECORDS)))
    def test_judged(record_property, i):
        record_property("gauntlet", RECORDS[i])     # what the plugin's JudgeItem hands on with its verdict
    """


def _as_dtype(record: dict, dtype: str) -> dict:
    """The same judgement filed under another dtype: a second item of the same solution."""
    out = copy.deepcopy(record)
    old = out["fingerprint"]["options"]["dtypes"][0]
    out["fingerprint"]["options"]["dtypes"] = [dtype]
    for part in ("cases", "score"):
        out[part] = {dtype: v for v in out[part].values()}
    for t in out["timings"]:
        assert t["dtype"] == old
        t["dtype"] = dtype
    return out


def _session(pytester, records: list, *args):
    """A session of planted records. Files given are copied in and named relatively: a path outside would move
    pytest's rootdir (which pytest finds from every path on the command line) out of the session's folder."""
    args = [_local(pytester, a) for a in args]
    (pytester.path / "planted.json").write_text(json.dumps(records))
    pytester.makepyfile(test_planted=textwrap.dedent(PLANT))
    return pytester.runpytest("-p", "no:cacheprovider", *PLUGIN, *map(str, args))


def _local(pytester, arg):
    if isinstance(arg, Path) and arg.is_file() and pytester.path not in arg.parents:
        (pytester.path / arg.name).write_bytes(arg.read_bytes())
        return arg.name
    return str(arg.relative_to(pytester.path)) if isinstance(arg, Path) and pytester.path in arg.parents else arg


def _on_this_card(pytester, path: Path) -> Path:
    """The stored records as if judged on this runner's card: the session's own records carry the runner's GPU (an
    H200, an H100, or none on the CPU), and records of two different cards are never compared (`different GPUs`),
    so a gate test that plants H100 records must compare them with a base of the same card, whatever card runs it."""
    from gauntlet.judge.records import results
    doc = json.loads(path.read_text())
    doc["environment"]["gpu"] = results.environment("cuda" if torch.cuda.is_available() else "cpu").get("gpu")
    out = pytester.path / f"base_{path.name}"
    out.write_text(json.dumps(doc))
    return out


def test_a_pass_that_is_a_failure_now_fails_a_session_whose_tests_passed(pytester):
    broken = dict(_record(1), verdict="fail", timings=[],
                  reasons=[{"code": "mismatch", "detail": "planted", "repro": ""}])
    result = _session(pytester, [broken], "--gauntlet-compare", _on_this_card(pytester, REAL[0]))
    result.assert_outcomes(passed=1)                         # the planting test itself passed ...
    assert result.ret == pytest.ExitCode.TESTS_FAILED        # ... and the gate failed the session
    result.stdout.fnmatch_lines(["*= gauntlet compare: 1 regression(s) =*", "## gauntlet compare: *",
                                 "### Verdicts that were pass", "*| gemm/triton_tiled@cuda | fail | mismatch |*"])


def test_a_real_slowdown_beyond_the_threshold_fails_and_one_within_it_does_not(pytester):
    slow = _slowed(_record(1), 1.10)
    base = _on_this_card(pytester, REAL[0])
    result = _session(pytester, [slow], "--gauntlet-compare", base)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*gauntlet compare: 1 regression(s)*", "*| bfloat16 |*| +9.9% |*| **slower** |"])
    result = _session(pytester, [slow], "--gauntlet-compare", base, "--gauntlet-fail-on", "15")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*gauntlet compare: 0 regression(s)*"])


def test_the_sessions_file_holds_one_record_per_solution_and_a_rerun_compares_quietly(pytester):
    """Two dtypes of one solution are two items, one record in the file; the next session, judged the same, is
    compared with it record for record (the other H100 run: the same code, so no regression)."""
    first = pytester.path / "main.json"
    result = _session(pytester, [_record(0), _as_dtype(_record(0), "float16")], "--gauntlet-out", first)
    assert result.ret == pytest.ExitCode.OK and "gauntlet compare" not in result.stdout.str()
    doc = json.loads(first.read_text())
    (merged,) = doc["records"]
    assert doc["schema"] == "gauntlet.run/1" and merged["verdict"] == "pass"
    assert sorted(merged["cases"]) == ["bfloat16", "float16"] and len(merged["timings"]) == 2
    assert merged["fingerprint"]["options"]["dtypes"] == ["bfloat16", "float16"]
    assert needs.schema_problems(doc, "run") == []

    second = pytester.path / "branch.json"
    result = _session(pytester, [_record(2), _as_dtype(_record(2), "float16")], "--gauntlet-compare", first,
                      "--gauntlet-out", second)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*gauntlet compare: 0 regression(s)*", "*2 timings compared*"])
    # the same document as `gauntlet compare main.json branch.json` makes
    assert compare.compare(compare.load(first), compare.load(second))["rows"] and \
        not compare.compare(compare.load(first), compare.load(second))["regressions"]


@pytest.mark.parametrize(("args", "says"), [
    (["--gauntlet-compare", "nope.json"], "--gauntlet-compare: nope.json: cannot be read: no such file"),
    (["--gauntlet-compare", "planted.json"], "--gauntlet-compare: planted.json:"),
    (["--gauntlet-fail-on", "-1"], "--gauntlet-fail-on must be a percentage in [0, 1000), got -1.0"),
])
def test_a_base_that_cannot_be_read_stops_the_session_before_anything_runs(pytester, args, says):
    result = _session(pytester, [_record(0)], *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"gauntlet: {says}" in result.stderr.str() and "passed" not in result.stdout.str()


def test_a_kernel_judged_wrong_on_the_cpu_is_a_regression_of_its_stored_pass(pytester):
    """A real judgement (CPU records have no timings): the stored file says wrong_sign passed; judged now, it fails,
    and the gate names it. One record is planted, the base's: the judgement is the plugin's own."""
    _make_project(pytester.path, {k: v for k, v in PROJECT.items() if "fused" not in k})
    base = {"schema": "gauntlet.run/1", "environment": {"device": "cpu"}, "records": [
        {"problem": "scale_add", "solution": "wrong_sign", "device": "cpu", "verdict": "pass", "reasons": []}]}
    (pytester.path / "main.json").write_text(json.dumps(base))
    result = pytester.runpytest("-p", "no:cacheprovider", *PLUGIN, "--gauntlet-device", "cpu",
                                "--gauntlet-compare", "main.json", "--gauntlet-out", "branch.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gauntlet compare: 1 regression(s)*",
                                 "*| scale_add/wrong_sign@cpu | fail | mismatch |*"])
    doc = json.loads((pytester.path / "branch.json").read_text())
    (record,) = doc["records"]
    assert record["verdict"] == "fail" and record["timings"] == []
    assert needs.schema_problems(doc, "run") == []                # the published results-file schema holds


def test_merge_keeps_the_worst_verdict_and_every_reason():
    a = dict(_record(0), verdict="pass")
    b = dict(_as_dtype(_record(0), "float16"), verdict="timeout", reasons=[{"code": "timeout", "detail": "x"}])
    c = dict(_as_dtype(_record(0), "float32"), verdict="fail", reasons=[{"code": "mismatch", "detail": "y"}])
    (merged,) = gate.merge([a, b, c])
    assert merged["verdict"] == "fail" and [r["code"] for r in merged["reasons"]] == ["timeout", "mismatch"]
    assert gate.merge([a]) == [a] and gate.merge([a])[0] is not a
    assert [r["solution"] for r in gate.merge([dict(a, solution="z"), a])] == ["triton_tiled", "z"]
