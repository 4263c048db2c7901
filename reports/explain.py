"""What the page's figures and words mean, per machine: said on the page itself, so a reader needs no other document.

A GPU group is told what its speedups are against (each problem's baselines, named), how the figure and its interval
are made, what a rank and a colour mean, and what each verdict and reason code on it means; a CPU group is told that
nothing was timed and what its grid shows instead. Every group says which machine, software and commit produced it.

The texts are plain strings, renderer-neutral: gauntlet.reports.page and gauntlet.reports.markdown escape them like any
other value. The reason codes and their meanings are the harness's own (gauntlet.reasons, a module that imports the
standard library only); the timing figures below mirror gauntlet.judge.timing.scoring (copied, not imported, so that
reading results never loads the judge; tests/test_report_explain.py checks that the copies still match).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..reasons import CODES
from .baselines import describe_baseline
from .machines import Group, describe_environment, label_machine

# Mirrors of gauntlet.judge.timing.scoring: BOOTSTRAP_N, SYSTEMATIC_FLOOR, HOST_BOUND_FLOOR.
BOOTSTRAP_N = 2000
SYSTEMATIC_FLOOR = 0.003
HOST_BOUND_FLOOR = 0.03

VERDICTS = ("pass: every fuzzed case agreed with the fp64 oracle within the problem's tolerance and no check fired; "
            "fail: a check caught it (its reason codes follow the verdict); error: it raised, its process died, or "
            "the file could not be imported; timeout: it ran past its wall-clock limit; unsupported: its backend "
            "cannot run on this machine (not a failure, and left out of the grid); interrupted: the judge was "
            "stopped, which says nothing of the solution. A dtype marked skipped under cases was not judged.")


@dataclass
class Explanation:
    items: list                                     # [(term, text, list)]: list names the attribute listed
                                                    # after the text ("baselines", "codes") or is ""
    baselines: list = field(default_factory=list)   # [(problem, label, what it runs or "", ranks the board)]
    codes: list = field(default_factory=list)       # [(code, verdict, meaning)] of the codes on this machine


def explain_group(group: Group, view, runs: list[tuple[str, dict]]) -> Explanation:
    """The explanation for one machine's part of the page; `view` is its gauntlet.reports.model.GroupView."""
    items = [("Produced by", "; ".join(sources(group, runs)) or "an unnamed machine", "")]
    listed = []
    if view.grid.timed:
        items += timed_items(host_bound(group))
        listed = list_baselines(view)
    else:
        items += [("Not timed", "a CPU run checks correctness only: each solution is fuzzed against the fp64 "
                                "oracle with the same checks as on a GPU, but nothing is timed, so there is no "
                                "speedup, interval or rank. Each grid cell is the solution's verdict; the cases "
                                "column says how many examples and calls were checked per dtype.", ""),
                  ("Colours", "a cell's colour is its verdict, as in the legend.", "")]
    items.append(("Verdicts", VERDICTS, ""))
    codes = list_codes(group)
    if codes:
        items.append(("Reason codes", "those on this machine's records:", "codes"))
    return Explanation(items, listed, codes)


def timed_items(host_bound_here: bool) -> list[tuple[str, str, str]]:
    host = (f", or by {100 * HOST_BOUND_FLOOR:g}% where a baseline whose calls wait for the GPU was timed through "
            "its host launches (it then times this host as well, and moves more from run to run)")
    return [
        ("Speedup", "the baseline's time over the solution's on the same shape: above 1× the solution is faster. "
                    "Both are timed in the same run on the same card, in alternating rounds of calls so that drift "
                    "falls on both alike; per shape, the median of every baseline call over the median of every "
                    "solution call. The grid and the vs columns give the geometric mean over the problem's timed "
                    "shapes (none when the baseline has no time at some shape); fast_1.0 and fast_1.5 are the "
                    "shares of those shapes at which the solution is at least 1× and 1.5× as fast.", ""),
        ("Baselines", "each problem's own, defined in its problem.yaml; a board ranks against the first.", "baselines"),
        ("Interval", f"the [low, high] after a shape's speedup, and the whiskers in its chart: a 95% bootstrap "
                     f"interval of that ratio ({BOOTSTRAP_N} resamplings of the rounds, each round's baseline and "
                     f"solution calls drawn together), widened by {100 * SYSTEMATIC_FLOOR:g}% on each side for the "
                     f"steady offset between two worker processes that resampling cannot see"
                     + (host if host_bound_here else "") + ". An interval that contains 1× does not tell the two "
                     "apart.", ""),
        ("Rank", "# orders the solutions that passed, fastest first by their geometric-mean speedup over the "
                 "problem's first baseline; solutions that did not pass follow with no rank (failures first, then "
                 "unsupported). A grid cell's colour is its verdict, as in the legend; a click leads to its row.", ""),
    ]


def sources(group: Group, runs: list[tuple[str, dict]]) -> list[str]:
    """The machine, software and commit of each distinct environment whose records fed this group."""
    seen: dict[str, None] = {}
    for _, doc in runs:
        env = doc.get("environment", {})
        for record in doc["records"]:
            if label_machine(env, str(record.get("device") or env.get("device") or "?")) == group.label:
                seen.setdefault(describe_environment(env), None)
                break
    return list(seen)


def host_bound(group: Group) -> bool:
    """Whether any baseline on this machine was timed through its host launches (its wider interval floor): one whose
    calls wait for the GPU and that was not timed by its kernels (records made before `timed_by` existed)."""
    return any(isinstance(base, dict) and base.get("waits_for_gpu") and base.get("timed_by") != "kernels"
               for record in group.records.values() for timing in record.get("timings", [])
               for base in (timing.get("baselines") or {}).values())


def list_baselines(view) -> list[tuple[str, str, str, bool]]:
    """Each problem's baselines as its boards name them, the board's first (ranking) one marked."""
    out, seen = [], set()
    for problem in view.problems:
        for board in problem.boards:
            for label in board.labels:
                if (problem.problem, label) not in seen:
                    seen.add((problem.problem, label))
                    out.append((problem.problem, label, describe_baseline(problem.problem, label),
                                label == board.primary))
    return out


def list_codes(group: Group) -> list[tuple[str, str, str]]:
    """The reason codes the machine's records carry, each with its meaning, in the order the list above gives."""
    found = {str(reason.get("code")) for record in group.records.values() for reason in record.get("reasons", [])
             if isinstance(reason, dict)}
    known = [(code, verdict, meaning) for code, (verdict, meaning) in CODES.items() if code in found]
    return known + [(code, "?", "not a code this report knows (written by another Gauntlet version?)")
                    for code in sorted(found - set(CODES))]
