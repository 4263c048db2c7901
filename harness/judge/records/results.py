"""Typed result records, the environment fingerprint, and the results file.

The results file is written after every record (to a temporary file, then renamed), so a run killed mid-way
leaves a complete, valid file holding everything measured so far, and `gauntlet run --out` on the same file
resumes where it stopped. Reports read these files and never launch kernels.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from ...discover import ROOT, UsageError

EVAL_SCHEMA = "gauntlet.eval/1"
RUN_SCHEMA = "gauntlet.run/1"


@dataclass
class EvalRecord:
    problem: str
    solution: str
    path: str
    backend: str | None
    device: str
    verdict: str = "pass"
    reasons: list = field(default_factory=list)      # [{code, detail, repro}]
    cases: dict = field(default_factory=dict)        # dtype -> {"examples", "calls", "status"}
    skipped: dict = field(default_factory=dict)      # dtype -> why it was not entered
    timings: list = field(default_factory=list)      # one per (dtype, benchmark shape), cuda only
    score: dict = field(default_factory=dict)        # dtype -> baseline -> summary
    static_notes: list = field(default_factory=list)   # a second opinion from reading the source; not a verdict
    fingerprint: dict = field(default_factory=dict)  # hashes of what the verdict depends on (judge/fingerprint.py)
    confinement: dict = field(default_factory=dict)  # what the OS enforced on each worker (judge/sandbox), as verified
    environment_modified: list = field(default_factory=list)   # package files that differ from their install record
    format: str | None = "native"    # the file's format (gauntlet.formats): native, kernelbench, gpumode; None: none
    adapter: dict = field(default_factory=dict)      # an adapted file: format, backend, backend_from, mapping
    seed: int | None = None
    elapsed_s: float = 0.0
    # Where elapsed_s went (gauntlet.judge.evaluate.Stages): workers' start, correctness and timing per dtype, closing
    # the workers, and the rest; a suite's records are its own profile.
    stages_s: dict = field(default_factory=dict)
    schema: str = EVAL_SCHEMA

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def key(self) -> str:
        return f"{self.problem}/{self.solution}@{self.device}"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """The commit of the checkout the harness runs from; None for an installed package (its version is recorded
    instead), so a virtualenv inside some other repository does not lend the harness that repository's commit."""
    if not (ROOT / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: str) -> dict:
    import torch
    env = {
        "host": platform.node(), "python": platform.python_version(), "platform": platform.platform(),
        "torch": torch.__version__, "cuda": torch.version.cuda, "git_commit": _git_commit(),
        "gauntlet": _version("gauntlet"),
        "triton": _version("triton"), "cupy": _version("cupy-cuda13x") or _version("cupy-cuda12x") or _version("cupy"),
        "cutlass_dsl": _version("nvidia-cutlass-dsl"), "hypothesis": _version("hypothesis"), "device": device,
    }
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, sm_count=props.multi_processor_count,
                   compute_capability=f"{props.major}.{props.minor}",
                   memory_gib=round(props.total_memory / 2**30, 1), l2_bytes=getattr(props, "L2_cache_size", None),
                   **_nvidia_smi())
    else:
        env.update(gpu=None, cpu=platform.processor() or platform.machine(), cpu_count=os.cpu_count())
    return env


def _nvidia_smi() -> dict:
    query = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0 or not out.stdout.strip():
        return {}
    values = [v.strip() for v in out.stdout.splitlines()[0].split(",")]
    return dict(zip(("driver", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "power_limit_w",
                     "temperature_c"), values))


class ResultsFile:
    """One JSON document per run: schema, environment, peaks, records, and `interrupted` while the last run
    to write it was stopped early. Rewritten atomically after each record."""

    def __init__(self, path: Path, env: dict, resume: bool = True):
        self.path = Path(path)
        self.was_interrupted = False
        self.doc = {"schema": RUN_SCHEMA, "created": _now(), "environment": env, "peaks": {}, "records": []}
        if resume and self.path.exists():
            old = load(self.path)
            self.doc["records"] = old["records"]
            self.doc["peaks"] = old.get("peaks", {})
            self.doc["created"] = old.get("created", self.doc["created"])
            self.was_interrupted = "interrupted" in old

    def done(self) -> set[str]:
        return {f"{r['problem']}/{r['solution']}@{r['device']}" for r in self.doc["records"]}

    def previous(self, key: str) -> dict | None:
        """The stored record under `problem/solution@device`, if any."""
        return next((r for r in self.doc["records"] if f"{r['problem']}/{r['solution']}@{r['device']}" == key), None)

    def add(self, record: EvalRecord, order: list[str] | None = None) -> None:
        """Store `record` (replacing its key's old one) and save. `order`: the run's plan, as keys; its records
        then stand in that order, after any others the file holds, so the file is the same whichever judgement
        finished first (several GPUs, a cluster)."""
        self.doc["records"] = [r for r in self.doc["records"]
                               if f"{r['problem']}/{r['solution']}@{r['device']}" != record.key]
        self.doc["records"].append(record.to_json())
        if order:
            rank = {key: i for i, key in enumerate(order)}
            self.doc["records"].sort(key=lambda r: rank.get(f"{r['problem']}/{r['solution']}@{r['device']}", -1))
        self.save()

    def mark_interrupted(self, how: dict) -> None:
        """Say in the file that the run stopped early, and where: a report or a script reading it must not take
        its records for the whole suite. The next run that writes the file drops the mark."""
        self.doc["interrupted"] = how
        self.save()

    def complete(self) -> None:
        """A run that went to the end: a mark left by an interrupted run before it goes, even when nothing was
        judged again (every record resumed) and so nothing else rewrote the file."""
        self.doc.pop("interrupted", None)
        if self.was_interrupted:
            self.save()
            self.was_interrupted = False

    def set_peaks(self, peaks: dict) -> None:
        self.doc["peaks"] = peaks
        self.save()

    def save(self) -> None:
        self.doc["updated"] = _now()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, default=str))
        os.replace(tmp, self.path)


def load(path: Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable results file: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("schema") != RUN_SCHEMA:
        raise UsageError(f"{path}: schema is {doc.get('schema') if isinstance(doc, dict) else None!r}, "
                         f"expected {RUN_SCHEMA!r}")
    return doc


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def stage_totals(records) -> dict:
    """Seconds per stage summed over records (each record's `stages_s`, a per-dtype stage summed over its dtypes):
    where a run's judging time went, for `run`'s last lines and eval-many's summary."""
    out: dict = {}
    for rec in records:
        for key, value in ((rec or {}).get("stages_s") or {}).items():
            spent = sum(value.values()) if isinstance(value, dict) else value
            out[key] = round(out.get(key, 0.0) + spent, 3)
    return out


def describe_stages(totals: dict) -> str:
    """`judging time by stage: correctness 603 s (39%), timing ...`, largest first; '' when nothing was judged."""
    whole = sum(totals.values())
    if whole <= 0:
        return ""
    parts = sorted(totals.items(), key=lambda kv: -kv[1])
    return "judging time by stage: " + ", ".join(f"{k} {v:.0f} s ({100 * v / whole:.0f}%)" for k, v in parts)
