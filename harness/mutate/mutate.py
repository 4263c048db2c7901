"""`gauntlet mutate`: a measure of the correctness net itself. Plant small, honest-looking bugs in a Triton
solution's kernels (harness/mutate/mutants.py), judge each mutant with the same core as `gauntlet eval`, and report
the fraction the judge rejects, with every escape listed (what changed, where, the diff).

How a mutant is judged, and why:
- The original is judged first, under the same settings (the control). If it does not pass, a rejected mutant
  would prove nothing, so no mutant is judged and the report says the original failed.
- Each mutant is a file in a private temporary directory (never in solutions/), named like the original so the
  records read the same; `evaluate` spawns its own worker process for it, as for any candidate. Correctness only:
  no timing, whatever the device.
- Dtype by dtype, in the problem's order, with the same fuzzing seed for every mutant and the control; the first
  dtype that catches a mutant ends its judgement (the verdict cannot go back to pass), so a caught mutant costs
  one dtype, an escape all of them.
- No shrinking (a verdict is all that is needed), and the failing cases that `evaluate` keeps for replay go to the
  temporary directory, not into .gauntlet/failures/ (they belong to files that are about to be deleted).

Outcomes: `caught` (any verdict but pass), `escaped` (pass), `stillborn` (the mutant could not be imported, or
Triton refused to build the kernel, in every dtype: no program to judge, so it says nothing about the net and is
left out of the score). A harness error while judging one (`harness_error`) is counted apart and also left out.
score = caught / (caught + escaped).
"""
from __future__ import annotations

import collections
import dataclasses
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..discover import SolutionInfo, UsageError, read_solution
from ..judge.evaluate import Options, evaluate
from . import mutants
from ..problem import Problem

SCHEMA = "gauntlet.mutate/1"

# Triton refusing to build a kernel: on a GPU a CompilationError; under the CPU interpreter the same front-end checks
# run at the first launch and raise from triton/language/ (an AssertionError, TypeError or ValueError about types or
# shapes). A fault while the kernel runs is raised elsewhere (the interpreter, numpy, the kernel's own line).
_COMPILE_ERROR = "CompilationError"
_FRONT_END = "/triton/language/"
_CAUSE_SPLIT = "\nThe above exception was the direct cause of the following exception:"


@dataclass
class Settings:
    device: str = "cpu"
    examples: int = 5              # Hypothesis examples per dtype, after the domain's edge cases
    seed: int = 0                  # picks the mutants and seeds the fuzzing, the same for every mutant
    max_mutants: int = 40
    dtypes: tuple | None = None    # None: every dtype the problem and the solution share
    timeout_s: float = 60.0        # per call
    operators: tuple = mutants.OPERATORS
    failures_dir: str | None = None    # where the mutants' failing cases go (run: a temporary folder)


def plan(solution: SolutionInfo, settings: Settings) -> tuple[list[mutants.Mutant], int]:
    """(the chosen mutants, how many the operators produced) for a Triton solution file."""
    if solution.error:
        raise UsageError(f"cannot mutate {solution.path}: {solution.error}")
    if solution.backend != "triton":
        raise UsageError(f"mutate works on Triton solutions (BACKEND = 'triton'); {solution.path} declares "
                         f"BACKEND = {solution.backend!r}")
    try:
        every = mutants.generate(solution.path.read_text(), tuple(settings.operators))
    except mutants.NotMutable as exc:
        raise UsageError(f"cannot mutate {solution.path}: {exc}") from None
    return mutants.select(every, settings.max_mutants, settings.seed), len(every)


def run(problem: Problem, solution: SolutionInfo, settings: Settings, progress=None) -> dict:
    """Judge the control and then every chosen mutant; the report as one JSON-ready dict."""
    t0 = time.monotonic()
    chosen, produced = plan(solution, settings)
    original = solution.path.read_text()
    report = {"schema": SCHEMA, "problem": problem.id, "solution": solution.name, "path": str(solution.path),
              "device": settings.device, "seed": settings.seed, "examples": settings.examples,
              "dtypes": list(_dtypes(problem, solution, settings)), "max": settings.max_mutants,
              "operators": list(settings.operators), "produced": produced, "mutants": []}
    with tempfile.TemporaryDirectory(prefix="gauntlet-mutate-") as tmp:
        settings = dataclasses.replace(settings, failures_dir=str(Path(tmp) / "failures"))
        control = judge(problem, solution, settings)
        report["control"] = control
        if control["verdict"] != "pass" or control["stillborn_in"]:
            report.update(_tally([]), verdict="control_failed", elapsed_s=round(time.monotonic() - t0, 1))
            return report
        for i, m in enumerate(chosen):
            folder = Path(tmp) / f"m{i:03d}"
            folder.mkdir()
            path = folder / solution.path.name
            path.write_text(m.source)
            result = judge(problem, read_solution(path, problem.id), settings)
            entry = {"id": i, "operator": m.operator, "description": m.description, "line": m.line,
                     "function": m.function, "diff": m.diff(original, solution.path.name), **result}
            report["mutants"].append(entry)
            if progress:
                progress(i + 1, len(chosen), entry)
    report.update(_tally(report["mutants"]))
    report["escapes"] = [m for m in report["mutants"] if m["outcome"] == "escaped"]
    report["verdict"] = "all_caught" if not report["escapes"] else "escapes"
    report["elapsed_s"] = round(time.monotonic() - t0, 1)
    return report


def judge(problem: Problem, solution: SolutionInfo, settings: Settings) -> dict:
    """One file, dtype by dtype: {outcome, verdict, dtype, codes, detail, elapsed_s, stillborn_in}.

    The first dtype that catches the mutant ends its judgement (its verdict cannot go back to pass). A dtype where
    Triton refuses to build it does not: the same edit can be a kernel that runs in another dtype (an fp16
    accumulator is legal for fp16 operands only), so the mutant is stillborn only if it is stillborn in every
    dtype, and escaped if it ran and passed in at least one."""
    t0 = time.monotonic()
    result = {"outcome": "stillborn", "verdict": "pass", "dtype": None, "codes": [], "detail": "",
              "stillborn_in": []}
    for dtype in _dtypes(problem, solution, settings):
        opts = Options(device=settings.device, dtypes=(dtype,), examples=settings.examples, seed=settings.seed,
                       timing=False, case_timeout_s=settings.timeout_s, shrink=False,
                       failures_dir=settings.failures_dir)
        try:
            record = evaluate(problem, solution, opts)
        except Exception as exc:  # noqa: BLE001 - the harness failed, not the mutant: say so, and go on
            result.update(outcome="harness_error", verdict="error", dtype=dtype, codes=[],
                          detail=f"harness error while judging: {type(exc).__name__}: {exc}"[:1500])
            break
        outcome = classify(record.verdict, record.reasons)
        if outcome == "escaped":
            result.update(outcome="escaped", verdict="pass", dtype=None, codes=[], detail="")
            continue
        reasons = record.reasons
        if outcome == "stillborn":
            result["stillborn_in"].append(dtype)
            if result["outcome"] == "escaped":
                continue                      # it ran and passed in an earlier dtype: still an escape so far
        result.update(outcome=outcome, verdict=record.verdict, dtype=dtype, codes=sorted({r["code"] for r in reasons}),
                      detail=(reasons[0]["detail"] if reasons else "")[-1500:])
        if outcome == "caught":
            break
    result["elapsed_s"] = round(time.monotonic() - t0, 1)
    return result


def classify(verdict: str, reasons: list[dict]) -> str:
    """caught / escaped / stillborn, from one judgement's verdict and reasons (see the module docstring)."""
    if verdict == "pass":
        return "escaped"
    codes = {r["code"] for r in reasons}
    if "import_error" in codes:
        return "stillborn"
    if codes == {"crash"} and all(_refused_by_triton(r.get("detail", "")) for r in reasons):
        return "stillborn"
    return "caught"


def _refused_by_triton(detail: str) -> bool:
    """True when a crash's traceback shows Triton refusing to build the kernel (see _FRONT_END): the root cause
    (the first traceback of a chain) was raised inside triton/language/. A traceback cut short at its start cannot
    show that, and then the crash counts as caught."""
    if _COMPILE_ERROR in detail:
        return True
    root = detail.split(_CAUSE_SPLIT)[0]
    frames = re.findall(r'File "([^"]+)", line \d+', root)
    return bool(frames) and _FRONT_END in frames[-1].replace("\\", "/")


def _tally(entries: list[dict]) -> dict:
    count = {k: sum(e["outcome"] == k for e in entries) for k in ("caught", "escaped", "stillborn", "harness_error")}
    scored = count["caught"] + count["escaped"]
    return {"judged": len(entries), **count, "score": round(count["caught"] / scored, 4) if scored else None}


def _dtypes(problem: Problem, solution: SolutionInfo, settings: Settings) -> tuple:
    wanted = settings.dtypes or tuple(problem.dtypes)
    for name in wanted:
        if name not in problem.dtypes:
            raise UsageError(f"unknown dtype {name!r} for {problem.id}; known: {', '.join(problem.dtypes)}")
    chosen = tuple(d for d in wanted if solution.dtypes is None or d in solution.dtypes)
    if not chosen:
        raise UsageError(f"none of the dtypes {list(wanted)} is in the solution's DTYPES {solution.dtypes}")
    return chosen


def render(report: dict) -> str:
    """The human summary: the figures, then every escape with its diff."""
    head = f"{report['problem']} / {report['solution']} on {report['device']}"
    settings = (f"seed {report['seed']}, {report['examples']} examples per dtype after the edge cases, "
                f"dtypes {', '.join(report['dtypes'])}; {report['judged']} of {report['produced']} mutants judged")
    control = report.get("control", {})
    if report.get("verdict") == "control_failed":
        return (f"{head}: the original does not pass under these settings ({control.get('verdict')}: "
                f"{', '.join(control.get('codes', []))} on {control.get('dtype')}), so no mutant was judged: "
                f"fix the solution first.\n  {control.get('detail', '')[:500]}")
    lines = [f"{head}: {report['caught']}/{report['caught'] + report['escaped']} caught"
             + (f" ({100 * report['score']:.0f}%)" if report["score"] is not None else "")
             + f", {report['escaped']} escaped, {report['stillborn']} stillborn",
             f"  {settings}; {report['elapsed_s']:.0f}s"]
    by_op: dict = {}
    for m in report["mutants"]:
        by_op.setdefault(m["operator"], collections.Counter())[m["outcome"]] += 1
    for op, c in by_op.items():
        lines.append(f"  {op:<17} caught {c['caught']}, escaped {c['escaped']}, stillborn {c['stillborn']}"
                     + (f", harness errors {c['harness_error']}" if c["harness_error"] else ""))
    for m in report.get("escapes", []):
        lines.append(f"\nESCAPED #{m['id']} {m['operator']} (line {m['line']}, {m['function']}): {m['description']}")
        lines.append(m["diff"].rstrip())
    return "\n".join(lines)


__all__ = ["SCHEMA", "Settings", "classify", "judge", "plan", "render", "run"]
