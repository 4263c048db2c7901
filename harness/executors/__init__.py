"""Where judgements run: the executors behind `gauntlet run` and `gauntlet eval-many`.

- inline (the default): one candidate after another in the CLI's own process, as `gauntlet eval` judges one.
- local (`--gpus N|all`): one judge process per GPU of this host, each pinned to its GPU (local.py, slot.py; which
  GPU a slot gets: slots.py, the rule the pytest plugin's xdist pinning uses too).
- ray (`--executor ray [--address ADDR]`): one Ray task per candidate, beyond one host (cluster.py).

All three run the same job in a trusted judge process (task.py: gauntlet.judge.evaluate, which starts the confined
workers as always) and hand back (job, result) pairs as judgements finish; the commands, not the executors, put the
results in order and write them, so the results file and the lines are the same whichever executor made them.
They live in a package of their own above the judge (trusted code that no candidate reaches: they use the judge
through gauntlet.judge.evaluate only), so that the CLI only chooses one, and Ray stays an optional import of one
module. many.py is eval-many's loop: one judge process judging many candidates of one problem.

May import: gauntlet.judge (evaluate, and records, process, timing for what a judge process sets up),
gauntlet.mutate (imported ahead with the rest of the trusted code), reports (likewise) and the shared harness
modules; never the CLI.
"""
from __future__ import annotations


class InlineExecutor:
    """Judges each job in this process, one at a time, in the order given."""

    kind = "inline"
    gpus = 1

    def run(self, jobs: list[dict], on_start=None):
        from ..judge.process import standby
        from . import task
        standby.enable()              # the next candidate's worker starts during this one's judgement
        for i, job in enumerate(jobs):
            if on_start:
                on_start(job, {"executor": "inline"})
            if i + 1 < len(jobs):
                task.prestart(jobs[i + 1])
            yield job, task.judge(job, where={"executor": "inline"})

    def close(self) -> None:
        from ..judge.process import standby
        standby.close()


def make(kind: str | None, device: str, gpus: str | None = None, address: str | None = None, overlap: int = 1):
    """The executor the options ask for. UsageError (the user's error) for a combination that cannot work.
    `overlap`: judges per GPU (--overlap K): K slots on each GPU, whose correctness phases run side by side while
    each timing has the card alone (gauntlet.judge.timing.turns)."""
    from ..discover import UsageError
    from . import slots
    if address and kind != "ray":
        raise UsageError("--address is for --executor ray")
    if overlap < 1:
        raise UsageError(f"--overlap must be a positive number of judges per GPU, got {overlap}")
    if overlap > 1 and kind == "ray":
        raise UsageError("--overlap is for the local executor (a Ray task holds a whole GPU)")
    if kind == "ray":
        from .cluster import RayExecutor
        logical = None
        if gpus is not None:
            if address:
                raise UsageError("--gpus with --address: the cluster says how many GPUs it has")
            logical = len(slots.slot_devices(gpus, device))
        elif device == "cpu" and not address:
            logical = slots.logical_count() or 1
        return RayExecutor(address=address, num_gpus=logical)
    if gpus is None and overlap == 1:   # --executor local without --gpus: judged in this process, no slots
        return InlineExecutor()
    from .local import LocalExecutor
    return LocalExecutor(slots.slot_devices(gpus or "1", device), overlap=overlap)
