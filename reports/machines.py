"""Where results ran: records grouped by machine, each machine's measured ceilings, and one line per results file.

Runs are grouped by where they ran (the GPU's name, or "CPU"), so an H100 run and an H200 run are never ranked
against each other; within a group, a record of the same problem/solution/device in a later file replaces the
earlier one, so re-running one solution and passing both files shows the new result.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .formatting import DASH, number


@dataclass
class Group:
    """All records that ran on one kind of machine; ranking happens only inside a group."""
    label: str
    records: dict = field(default_factory=dict)   # (problem, solution, device) -> record
    peaks: dict = field(default_factory=dict)     # the measured ceilings of the runs that fed this group


def merge_groups(runs: list[tuple[str, dict]]) -> list[Group]:
    """Group records by machine; a later file's record of the same problem/solution/device replaces an earlier one."""
    groups: dict[str, Group] = {}
    for _, doc in runs:
        env = doc.get("environment", {})
        for record in doc["records"]:
            device = str(record.get("device") or env.get("device") or "?")
            label = label_machine(env, device)
            group = groups.setdefault(label, Group(label))
            group.records[(record["problem"], record["solution"], device)] = record
            group.peaks.update(doc.get("peaks") or {})
    return list(groups.values())


def label_machine(env: dict, device: str) -> str:
    """The name runs are grouped by: the GPU's name for GPU runs, "CPU" for CPU runs."""
    if device == "cpu":
        return "CPU"
    return str(env.get("gpu") or device.upper())


def settings_warnings(group: Group) -> list[str]:
    """Records ranked side by side should have been judged alike: say so when the harness or the options differ
    between them, or when a record carries no fingerprint at all (judged by an older Gauntlet)."""
    kinds: dict = {}
    bare = 0
    for record in group.records.values():
        fp = record.get("fingerprint")
        if not isinstance(fp, dict) or not fp:
            bare += 1
            continue
        opts = fp.get("options") if isinstance(fp.get("options"), dict) else {}
        key = (str(fp.get("harness")), json.dumps(opts, sort_keys=True, default=str))
        kinds.setdefault(key, []).append(record)
    out = []
    if len(kinds) > 1:
        harnesses = sorted({k[0] for k in kinds})
        options = [json.loads(k[1]) for k in kinds]
        differing = sorted({name for o in options for name in o if any(o.get(name) != p.get(name) for p in options)})
        out.append(f"{group.label}: records were judged under {len(kinds)} different settings"
                   + (f" (harness versions {', '.join(harnesses)})" if len(harnesses) > 1 else "")
                   + (f" (options differ in: {', '.join(differing)})" if differing else "")
                   + "; compare their figures with care")
    if bare:
        out.append(f"{group.label}: {bare} record(s) carry no fingerprint (judged by an older Gauntlet): their "
                   "settings are unknown")
    return out


def describe_run(name: str, doc: dict) -> dict:
    env = doc.get("environment", {})
    return {"file": name, "label": label_machine(env, str(env.get("device") or "?")),
            "environment": describe_environment(env), "peaks": describe_peaks(doc.get("peaks", {})),
            "created": str(doc.get("created", DASH)), "updated": str(doc.get("updated", DASH)),
            "records": len(doc["records"]), "interrupted": describe_interruption(doc.get("interrupted"))}


def describe_interruption(mark) -> str:
    """The run was stopped before the end (gauntlet.judge.records.stopped writes the mark): its table is partial."""
    if not mark:
        return ""
    rest = mark.get("not_judged") if isinstance(mark.get("not_judged"), list) else []
    flight = f" while judging {mark['in_flight']}" if mark.get("in_flight") else ""
    return (f"stopped by {mark.get('signal', '?')} at {mark.get('at', '?')}{flight}: partial results, "
            f"{len(rest)} not judged; resume with: {mark.get('resume', 'gauntlet run')}")


def describe_environment(env: dict) -> str:
    """One line with what decides a number's meaning: machine, library versions, and the code's commit."""
    parts = [label_machine(env, str(env.get("device") or "?"))]
    if env.get("cpu"):
        parts.append(str(env["cpu"]))
    if env.get("cpu_count"):
        parts.append(f"{env['cpu_count']} cores")
    if env.get("sm_count"):
        parts.append(f"{env['sm_count']} SMs")
    for key, name in (("driver", "driver"), ("torch", "torch"), ("cuda", "CUDA"), ("triton", "triton"),
                      ("cupy", "cupy"), ("cutlass_dsl", "cutlass-dsl")):
        if env.get(key):
            parts.append(f"{name} {env[key]}")
    if env.get("git_commit"):
        commit = str(env["git_commit"])
        parts.append(f"commit {commit[:12]}{'-dirty' if commit.endswith('-dirty') else ''}")
    if env.get("host"):
        parts.append(f"host {env['host']}")
    return " · ".join(parts)


def describe_peaks(peaks: dict) -> str:
    """Measured peaks, the yardstick behind every "% of peak" figure."""
    parts = []
    for key, value in peaks.items():
        if isinstance(value, dict) and number(value.get("tflops")) is not None:
            parts.append(f"{key} {number(value['tflops']):.1f} TFLOP/s")
        elif key.endswith("_gbps") and number(value) is not None:
            parts.append(f"{key.removesuffix('_gbps')} {number(value):.0f} GB/s")
        elif isinstance(value, float):
            parts.append(f"{key} not a number")
        else:
            parts.append(f"{key} {value}")
    return ", ".join(parts) or "not measured"


def ceilings(group: Group) -> dict:
    """The roofline's ceilings: {"tflops": {dtype: TFLOP/s}, "copy_gbps": GB/s or None, "derived": bool}.

    From the runs' measured `peaks` (harness/judge/timing/peaks.py); where a run carries none (eval-many lines hold no
    peaks), from the records themselves: each timing's peak_fraction is its TFLOP/s over the dtype's measured peak and
    bw_fraction its GB/s over the copy bandwidth (harness/judge/timing/timed.py), so the ratio gives the ceiling back.
    """
    compute = {k: number(v.get("tflops")) for k, v in group.peaks.items() if isinstance(v, dict)}
    compute = {k: v for k, v in compute.items() if v and v > 0}
    copy_gbps = number(group.peaks.get("copy_gbps"))
    copy_gbps = copy_gbps if copy_gbps and copy_gbps > 0 else None
    derived = False
    for record in group.records.values():
        for timing in record.get("timings", []):
            dtype, tflops, gbps = timing.get("dtype"), number(timing.get("tflops")), number(timing.get("gbps"))
            peak_fraction, bw_fraction = number(timing.get("peak_fraction")), number(timing.get("bw_fraction"))
            if dtype not in compute and tflops and peak_fraction and tflops / peak_fraction > 0:
                compute[str(dtype)], derived = tflops / peak_fraction, True
            if copy_gbps is None and gbps and bw_fraction and gbps / bw_fraction > 0:
                copy_gbps, derived = gbps / bw_fraction, True
    return {"tflops": compute, "copy_gbps": copy_gbps, "derived": derived}
