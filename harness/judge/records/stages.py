"""Where a judgement's wall time goes, measured as it runs (the record's `stages_s`)."""
from __future__ import annotations

import time

from .results import EvalRecord, stage_totals


class Stages:
    """Where a judgement's wall time goes (the record's `stages_s`), measured as it runs: `start` (the workers'
    start-ups, restarts included, and the turns waited for them), `correctness` and `timing` per dtype (timing
    includes the baseline's readiness and any ceiling measured), `close` (the workers' ends), and `rest` (the
    judge's preparation: fingerprints, the environment's and source tree's digests). Where a suite's time went is
    then read from its results file, on any machine, with no second run."""

    def __init__(self, record: EvalRecord):
        self.out = record.stages_s
        self.mark = time.monotonic()

    def lap(self, key: str, dtype: str | None = None) -> None:
        """Add the time since the last lap to `key` (per dtype where given), and start the next lap."""
        now = time.monotonic()
        spent = now - self.mark
        if dtype is None:
            self.out[key] = round(self.out.get(key, 0.0) + spent, 3)
        else:
            per = self.out.setdefault(key, {})
            per[dtype] = round(per.get(dtype, 0.0) + spent, 3)
        self.mark = now

    def skip(self) -> None:
        self.mark = time.monotonic()

    @staticmethod
    def finish(record: EvalRecord) -> None:
        counted = sum(stage_totals([{"stages_s": record.stages_s}]).values())
        record.stages_s["rest"] = round(max(0.0, record.elapsed_s - counted), 3)
