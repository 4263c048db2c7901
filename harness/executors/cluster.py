"""Beyond one host: one Ray task per candidate (`--executor ray [--address ADDR]`, `pip install gauntlet[ray]`).

Ray does the scheduling, the placement and the retries; nothing here queues or schedules. Each task:
- asks for one GPU (`num_gpus=1`): Ray gives it a GPU of its own and sets CUDA_VISIBLE_DEVICES to it before the
  task runs, so the judge and the confined workers it starts see only that GPU;
- runs in a fresh worker process that exits after it (`max_calls=1`): no candidate's state, CUDA context or sticky
  error outlives its task, and the next task starts clean;
- is the judge: gauntlet.executors.task.judge, exactly as a local slot runs it (the candidate's confined
  workers are started by it, as `gauntlet eval` starts them);
- is retried (`max_retries`) only when its process or node is lost. A candidate that crashes, hangs or faults does
  so in its own confined worker, which the judge survives: that is the candidate's verdict (`crash`, `timeout`),
  returned normally, never a retry. Exceptions are not retried (`retry_exceptions=False`): the judge returns its
  own failures as `error` records, so an exception reaching Ray is a harness bug, said once.

The driver takes each result as soon as Ray has it (`ray.wait`), and drops the reference: a verdict once gathered
is final, and nothing is left for Ray's lineage reconstruction to re-run (results are small, so they travel inline
with the reply to the driver rather than staying in a node's object store). The candidate's source travels in the
task's arguments, so a node needs no copy of the driver's files; it needs the same Gauntlet (the harness's hash is
checked) and, for problems of your own, the same `--problems` folders (their hashes too).
"""
from __future__ import annotations

import contextlib

from ..discover import UsageError

MAX_RETRIES = 3          # lost workers or nodes per task; a fourth loss is an `error` record that says so
POLL_S = 0.5             # ray.wait's timeout, so that SIGINT/SIGTERM reach the driver's Python promptly


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError("--executor ray needs Ray: pip install 'gauntlet[ray]'") from None
    return ray


def judge_in_task(job: dict) -> dict:
    """The task's body, in its fresh worker process: the same preparation as the CLI's own process, then the job."""
    import ray

    from . import task
    task.prepare_process()
    where = {"executor": "ray", "node": ray.get_runtime_context().get_node_id()}
    return task.judge(job, where=where)


class RayExecutor:
    kind = "ray"

    def __init__(self, address: str | None = None, num_gpus: int | None = None):
        ray = self.ray = _ray()
        self.started = False
        if not ray.is_initialized():
            # No dashboard (a web server nobody asked for), worker output kept in the session's log files on each
            # node rather than mixed into the driver's stdout (which carries eval-many's JSON lines).
            try:
                ray.init(address=address, num_gpus=num_gpus if address is None else None, include_dashboard=False,
                         log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                what = f"reach the cluster at {address}" if address else "start a local cluster"
                raise UsageError(f"--executor ray: could not {what}: {exc}") from None
            self.started = True
        gpus = self.gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus < 1:
            self.close()
            raise UsageError(f"the Ray cluster{' at ' + address if address else ''} declares no GPU: each "
                             "candidate's task asks for one (start nodes with GPUs, or `ray start --num-gpus N` "
                             "for logical ones)")
        self.remote = ray.remote(num_gpus=1, max_calls=1, max_retries=MAX_RETRIES,
                                 retry_exceptions=False)(judge_in_task)
        self.in_flight: dict = {}

    def run(self, jobs: list[dict], on_start=None):
        """Submit every job as a task, then yield (job, result) as each task finishes."""
        ray = self.ray
        for job in jobs:
            self.in_flight[self.remote.remote(job)] = job
            if on_start:
                on_start(job, {"executor": "ray"})
        while self.in_flight:
            done, _ = ray.wait(list(self.in_flight), num_returns=1, timeout=POLL_S)
            for ref in done:
                job = self.in_flight.pop(ref)
                yield job, self._get(ref, job)
                del ref                       # gathered: final; no lineage left to re-run it

    def _get(self, ref, job: dict) -> dict:
        from . import task
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:     # lost beyond its retries, or a harness bug in the task
            detail = (f"harness error: the Ray task judging this candidate failed ({type(exc).__name__}: "
                      f"{str(exc)[-1500:]}); lost workers and nodes are retried {MAX_RETRIES} times; not a "
                      "verdict on the candidate")
            return {"index": job["index"], "record": task.harness_error(job, job["options"]["device"], detail),
                    "peaks": {}, "where": {"executor": "ray"}}

    def close(self) -> None:
        """Cancel what is still running (a stopped driver: its tasks would otherwise go on judging on the
        cluster) and, if this process started the cluster, stop it."""
        for ref in list(self.in_flight):
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)
        self.in_flight.clear()
        if self.started:
            with contextlib.suppress(Exception):
                self.ray.shutdown()
            self.started = False
