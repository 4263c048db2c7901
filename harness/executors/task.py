"""One judgement as a job: what a judge process is handed, and what it hands back, in plain JSON.

Every executor runs this same function, `judge(job)`, in a trusted judge process: the CLI's own process
(inline), a slot process pinned to one GPU (local), or a Ray task's fresh worker process (cluster). So a candidate
is judged the same way wherever it lands: gauntlet.judge.evaluate in that process, which starts the confined
workers exactly as `gauntlet eval` does. Jobs and results are JSON-able dicts, not pickles: they cross process
and host boundaries, and a results line is what the driver writes anyway.

A job: {"index", "problem" (id), "path" (the candidate's file as the driver knows it), "options" (Options as a
dict), "search" (the driver's search path), optionally "source" (the file's text, for a judge on another host,
written there into a private folder under the same file name) and "expect" (the driver's hashes of the problem,
its baselines and the harness: a judge whose own differ refuses to judge, rather than judge against another
version of the problem).
A result: {"index", "record" (the eval record as JSON), "peaks" (the ceilings the judgement used), "where"
({"executor", "host", "pid", "device" (its CUDA_VISIBLE_DEVICES), "started_at", ...})}.
"""
from __future__ import annotations

import dataclasses
import gc
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

CHECKED_PARTS = ("problem", "baselines", "harness")     # what must match between the driver and a remote judge

_PEAKS: dict = {}       # (problem, dtypes) -> ceilings measured in this process: once per device, not per candidate


def make_job(index: int, problem, solution, opts, *, ship_source: bool = False, expect: dict | None = None,
             fmt: str | None = None, backend: str | None = None) -> dict:
    """The job for judging `solution` (a discover.SolutionInfo) of `problem` under `opts`, with the search path
    in force here. `ship_source`: carry the file's text (a judge on another host cannot read this one's files).
    `fmt`, `backend`: the user's --format and --backend (gauntlet.formats), applied where the job is judged."""
    from .. import discover
    job = {"index": index, "problem": problem.id, "path": str(solution.path), "options": options_to_json(opts),
           "search": search_to_json(discover.search_path()), "format": fmt, "backend": backend}
    if ship_source:
        job["source"] = Path(solution.path).read_text()
    if expect:
        job["expect"] = {part: expect[part] for part in CHECKED_PARTS}
    return job


def options_to_json(opts) -> dict:
    doc = dataclasses.asdict(opts)
    doc["peaks"] = {}               # measured by the judge process on its own device
    return doc


def options_from_json(doc: dict):
    from ..judge.evaluate import Options
    doc = dict(doc)
    if doc.get("dtypes") is not None:
        doc["dtypes"] = tuple(doc["dtypes"])
    return Options(**doc)


def search_to_json(sp) -> dict:
    return {"problems": [str(p) for p in sp.problems], "solutions": [str(p) for p in sp.solutions],
            "project": str(sp.project), "shipped": sp.shipped, "config": str(sp.config) if sp.config else None,
            "origins": [list(o) for o in sp.origins]}


def search_from_json(doc: dict):
    from ..searchpath import SearchPath
    return SearchPath(problems=tuple(Path(p) for p in doc["problems"]),
                      solutions=tuple(Path(p) for p in doc["solutions"]), project=Path(doc["project"]),
                      shipped=doc["shipped"], config=Path(doc["config"]) if doc.get("config") else None,
                      origins=tuple(tuple(o) for o in doc.get("origins", ())))


def prepare_process() -> None:
    """What the CLI does for its own process before any candidate runs, done by every other judge process too:
    no same-user reads of its memory, and every judge-side module imported now, so a candidate that rewrote a
    harness file on disk never gets it imported into a judge later."""
    undumpable()
    import_judge_code()


def undumpable() -> None:
    """PR_SET_DUMPABLE 0: a process of the same user without CAP_SYS_PTRACE (an unconfined candidate, `--sandbox
    off`) can then neither read nor write this judge's memory nor open its descriptors."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(ctypes.c_int(4), ctypes.c_ulong(0), ctypes.c_ulong(0),
                                                 ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):
        pass


def import_judge_code(leaderboard: bool = True) -> None:
    """Every judge-side module, imported before any candidate runs (gauntlet.cli.main._import_everything says why);
    `leaderboard`: gauntlet.reports.leaderboard too, for a process that builds one after its judgements."""
    import importlib
    import pkgutil

    from .. import executors, judge, mutate
    for pkg in (judge, executors, mutate):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            importlib.import_module(info.name)
    if leaderboard:
        from ..reports import leaderboard  # noqa: F401


def judge(job: dict, where: dict | None = None) -> dict:
    """Judge one job in this process. Never raises for a candidate's sake or the harness's: whatever goes wrong
    is the record's `error` (a harness error, said so), as in `gauntlet run`."""
    where = dict(where or {}, host=platform.node(), pid=os.getpid(),
                 device=os.environ.get("CUDA_VISIBLE_DEVICES"), started_at=round(time.time(), 3))
    peaks: dict = {}
    folder = None
    t0 = time.monotonic()
    try:
        from .. import discover
        previous = discover.use(search_from_json(job["search"]))
        try:
            problem = discover.get_problem(job["problem"])
            path = job["path"]
            if job.get("source") is not None:
                folder = tempfile.mkdtemp(prefix="gauntlet-job-")          # 0700: this user only
                path = os.path.join(folder, Path(job["path"]).name)
                Path(path).write_text(job["source"])
            try:
                solution = discover.get_solution(problem.id, path, fmt=job.get("format"),
                                                 backend=job.get("backend"))
            except discover.UsageError as exc:      # the file went away before its turn: the candidate's line
                return {"index": job["index"], "record": harness_error(job, job["options"]["device"], str(exc),
                                                                     code="import_error"),
                        "peaks": {}, "where": where, "wall_s": 0.0}
            opts = options_from_json(job["options"])
            mismatch = _mismatch(job.get("expect"), problem, solution, opts)
            if mismatch:
                record = harness_error(job, opts.device, f"this judge ({where['host']}) has another {mismatch} than "
                                                          "the driver: install the same Gauntlet and problem "
                                                          "folders on every node")
            else:
                if opts.device == "cuda" and opts.timing:
                    opts.peaks = peaks = measure_peaks_for(problem, opts.dtypes)
                from ..judge.evaluate import evaluate
                record = evaluate_or_record(evaluate, problem, solution, opts).to_json()
        finally:
            discover.use(previous)
    except Exception:  # noqa: BLE001 - the judge's own failure: this job's record, never a dead run
        record = harness_error(job, job.get("options", {}).get("device", "cpu"),
                               "harness error while judging: " + traceback.format_exc()[-2000:])
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
        release_gpu()
    record["path"] = job["path"]         # the driver's name for the file, wherever it was judged
    return {"index": job["index"], "record": record, "peaks": peaks, "where": where,
            "wall_s": round(time.monotonic() - t0, 2)}


def release_gpu() -> None:
    """Hand the allocator's reserve back to the card between two jobs of this process. A judgement that ended in a
    harness error leaves what its frames held cached, tens of GB after a spot check that ran out of memory: enough
    that the next judge's timed shape on that card cannot build its inputs (docs/benchmarks.md, "The main job on one
    GPU"). Other judges share the card (--overlap), so nothing is kept for the next job."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    gc.collect()
    torch.cuda.empty_cache()


def prestart(job: dict) -> None:
    """Start the worker of the job this process judges next, gated (gauntlet.judge.process.standby), so that its
    start-up overlaps the current judgement. Anything that goes wrong here is left for the job's own judgement to
    meet."""
    from .. import discover
    from ..judge.process import standby
    if job.get("source") is not None or not standby.enabled():
        return                        # a shipped source is written out only when its turn comes
    try:
        previous = discover.use(search_from_json(job["search"]))
        try:
            problem = discover.get_problem(job["problem"])
            solution = discover.get_solution(problem.id, job["path"], fmt=job.get("format"),
                                             backend=job.get("backend"))
            standby.prestart(problem, solution, options_from_json(job["options"]))
        finally:
            discover.use(previous)
    except Exception:  # noqa: BLE001 - a hint, never a failure
        pass


def _mismatch(expect: dict | None, problem, solution, opts) -> str | None:
    if not expect:
        return None
    from ..judge.records.fingerprint import fingerprint
    mine = fingerprint(problem, solution, opts)
    wrong = [part for part in CHECKED_PARTS if expect.get(part) != mine.get(part)]
    return " and ".join(wrong) if wrong else None


def evaluate_or_record(evaluate, problem, solution, opts):
    """A harness error on one candidate becomes that candidate's record; the suite goes on."""
    from ..judge.records.results import EvalRecord
    from ..reasons import Reason
    try:
        return evaluate(problem, solution, opts)
    except Exception:  # noqa: BLE001
        record = EvalRecord(problem=problem.id, solution=solution.name, path=str(solution.path),
                            backend=solution.backend, device=opts.device, verdict="error",
                            format=getattr(solution, "format", "native"))
        record.reasons.append(Reason("crash", "harness error while judging: " + traceback.format_exc()[-2000:])
                              .to_json())
        return record


def harness_error(job: dict, device: str, detail: str, code: str = "crash") -> dict:
    """A job's record when it could not be judged (the judge itself failed, or the file is gone): verdict
    `error`, a reason whose detail says whose failure it was."""
    from ..judge.records.results import EvalRecord
    from ..reasons import Reason
    record = EvalRecord(problem=job["problem"], solution=Path(job["path"]).stem, path=job["path"], backend=None,
                        device=device, verdict="error")
    record.reasons.append(Reason(code, detail).to_json())
    return record.to_json()


def measure_peaks_for(problem, only=None) -> dict:
    """The device's ceilings for the dtypes judged (`only`; None: every dtype of the problem), measured in this
    trusted process before its candidate runs, or read from the judge's cache of this card's ceilings
    (gauntlet.judge.timing.peaks.cached_peaks); once per process and problem."""
    key = (problem.id, tuple(sorted(only)) if only else None)
    if key not in _PEAKS:
        import torch

        from ..judge.timing.peaks import cached_peaks
        dtypes = {name: (spec.torch_dtype(), spec.tf32) for name, spec in problem.dtypes.items()
                  if not only or name in only}
        _PEAKS[key] = cached_peaks(torch.device("cuda"), dtypes)
    return _PEAKS[key]
