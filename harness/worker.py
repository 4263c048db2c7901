"""The child process: imports one candidate and runs it on request. It judges nothing.

Started by harness.isolate as `python -m harness.worker REQ_FD RESP_FD PROBLEM SOLUTION_PATH BACKEND DEVICE`, with
its stdout/stderr sent to a log file, so whatever the candidate prints never reaches the channel or the CLI's
JSON. For each request it regenerates the inputs from the seed it is given, calls solve, and sends back the output
bytes plus what the in-process guards saw. The parent computes every verdict.
"""
from __future__ import annotations

import sys
import time
import traceback

from harness import protocol


def main(argv: list[str]) -> int:
    req_fd, resp_fd = int(argv[0]), int(argv[1])
    problem_id, path, backend, device = argv[2:6]
    from harness import backends
    backends.prepare_process(backend, device)     # before anything imports triton
    session = Session(problem_id, path, backend, device)
    protocol.send(resp_fd, session.start())
    while True:
        try:
            request, _ = protocol.recv(req_fd)
        except protocol.ChannelClosed:
            return 0
        if request.get("op") == "exit":
            return 0
        header, blobs = session.handle(request)
        protocol.send(resp_fd, header, blobs)


class Session:
    def __init__(self, problem_id, path, backend, device):
        self.problem_id, self.path, self.backend, self.device = problem_id, path, backend, device
        self.solve = None
        self.watch = None

    # -- start-up ------------------------------------------------------------------------------------------------
    def start(self) -> dict:
        import torch  # noqa: F401 - import torch before the candidate so its patches are visible as changes

        from harness import backends, discover, guard
        try:
            # Everything this process will run on the harness's behalf is imported now, before the candidate can
            # touch a file: the harness's modules, the problem's reference and the baselines.
            guard.import_harness()
            self.problem = discover.get_problem(self.problem_id)
            self.problem.module()
            self.baselines = _load_baselines(self.problem)
            backends.after_import(self.backend, self.device)
        except Exception:  # noqa: BLE001
            return {"ok": False, "code": "crash", "detail": "harness start-up failed:\n" + _tb()}
        if self.device == "cuda":
            import torch
            torch.cuda.init()
            guard.remember_l2_baseline()
        self.watch = guard.TamperWatch()
        try:
            from harness.problem import load_module
            module = load_module(self.path, "gauntlet_candidate")
        except BaseException:  # noqa: BLE001 - SystemExit in a module body is an import error too
            return {"ok": False, "code": "import_error", "detail": _tb()}
        missing = [n for n in ("BACKEND", "solve") if not hasattr(module, n)]
        if missing or not callable(module.solve):
            return {"ok": False, "code": "import_error", "detail": f"solution lacks {missing or ['callable solve']}"}
        if module.BACKEND != self.backend:
            return {"ok": False, "code": "import_error",
                    "detail": f"BACKEND is {module.BACKEND!r} at run time but {self.backend!r} in the source"}
        self.solve = module.solve
        changed = self.watch.changed()
        if changed:
            return {"ok": False, "code": "tampering", "detail": "import patched: " + ", ".join(changed[:10])}
        return {"ok": True}

    # -- requests ------------------------------------------------------------------------------------------------
    def handle(self, request: dict):
        op = request.get("op")
        try:
            if op == "case":
                return self.run_case(request)
            if op == "time":
                return self.run_timing(request)
            return {"ok": False, "code": "crash", "detail": f"unknown request {op!r}"}, []
        except BaseException:  # noqa: BLE001 - any failure of the candidate is a verdict, not a dead harness
            return {"ok": False, "code": "crash", "detail": _tb()}, []

    def _inputs(self, request, seed):
        from harness.oracle import make_inputs
        spec = self.problem.dtype(request["dtype"])
        return spec, make_inputs(self.problem, request["shape"], spec, seed, self.device)

    def run_case(self, request: dict):
        import torch

        from harness import guard
        from harness.oracle import matmul_precision
        spec, inputs = self._inputs(request, request["seed"])
        cuda = self.device == "cuda"
        custom = self.backend != "torch"
        recorder = guard.OpRecorder() if custom else None
        threads = guard.live_threads()
        kernels = None
        if cuda:
            torch.cuda.synchronize()
        with matmul_precision(spec), torch.no_grad():
            if recorder is not None:
                with recorder:
                    if cuda and request.get("profile"):
                        out, kernels = guard.profiled_call(self.solve, inputs)
                    else:
                        out = self.solve(*inputs)
            else:
                out = self.solve(*inputs)
        background = guard.background_work(threads)
        if cuda:
            # The answer must be complete once the current stream gets there: read it after a sync of that stream
            # alone. Work the candidate left on other streams shows as a slow device-wide sync afterwards.
            torch.cuda.current_stream().synchronize()
        header_meta = guard.describe_output(out, inputs)
        payload = protocol.tensor_to_wire(out) if header_meta["is_tensor"] else None
        l2 = 0
        if cuda:
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            straggler_ms = (time.perf_counter() - t0) * 1e3
            if straggler_ms > 1.0:
                background = "; ".join(filter(None, [background, f"GPU work still running {straggler_ms:.1f} ms "
                                                                  "after solve returned (another stream?)"]))
            l2 = guard.l2_changed()
        tampering = self.watch.changed()
        if l2:
            tampering.append(f"persisting L2 carve-out of {l2} bytes set (defeats the L2 flush)")
            guard.reset_persisting_l2()
        header = {"ok": True, "meta": header_meta, "input_digests": [guard.digest(x) for x in inputs],
                  "forbidden_ops": recorder.forbidden if recorder else [], "tampering": tampering,
                  "background": background, "kernels": kernels,
                  "kernel_problem": guard.kernel_verdict(kernels) if kernels is not None else ""}
        if payload is None:
            return header, []
        guard.poison(out)
        del out
        if cuda:
            torch.cuda.empty_cache()
        header["wire"] = payload[0]
        return header, [payload[1]]

    def run_timing(self, request: dict):
        import random

        import torch

        from harness import guard, timing
        from harness.oracle import matmul_precision
        spec = self.problem.dtype(request["dtype"])
        fresh = random.SystemRandom()
        sets = [self._inputs(request, fresh.randrange(2**31))[1] for _ in range(request.get("sets", 3))]

        def refill(k):
            seed = fresh.randrange(2**31)
            for dst, src in zip(sets[k], self._inputs(request, seed)[1]):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
            return seed

        sides, notes = {"candidate": self.solve}, {}
        for label in request["baselines"]:
            module = self.baselines[label]
            sides[label] = module.solve
            notes[label] = _describe(module, sets[0])
        with matmul_precision(spec), torch.no_grad():
            result = timing.time_sides(sides, sets, reps=request.get("reps", 50), refill=refill,
                                       spots=request.get("spots", 2), budget_s=request.get("budget_s", 20.0))
        header = {"ok": True, "sides": {}, "tampering": self.watch.changed(), "spots": []}
        for label, r in result.items():
            side = {"error": r["error"]} if "error" in r else {"ms": r["ms"], "wall_ms": r["wall_ms"], "mode": r["mode"]}
            header["sides"][label] = dict(side, note=notes.get(label, ""))
        blobs = []
        for seed, out in result["candidate"]["spots"]:
            meta = guard.describe_output(out, tuple(x for inputs in sets for x in inputs))
            if meta["is_tensor"]:
                wire, blob = protocol.tensor_to_wire(out)
                meta["wire"] = wire
                blobs.append(blob)
            header["spots"].append(dict(meta, seed=seed))
        return header, blobs


def _load_baselines(problem) -> dict:
    from harness.discover import solutions_dir
    from harness.problem import load_module
    return {label: load_module(solutions_dir() / problem.id / f"{name}.py", f"gauntlet_baseline_{label}")
            for label, name in problem.baselines.items()}


def _describe(module, inputs) -> str:
    """A baseline may say which path it takes (`describe(*inputs)` or a NOTE string), e.g. block-scaled
    _scaled_mm versus dequantize-then-GEMM; the result records it beside the baseline's time."""
    try:
        describe = getattr(module, "describe", None)
        return str(describe(*inputs)) if callable(describe) else str(getattr(module, "NOTE", ""))
    except Exception as exc:  # noqa: BLE001
        return f"describe() failed: {exc}"


def _tb(limit: int = 4000) -> str:
    text = traceback.format_exc()
    return text if len(text) <= limit else "...\n" + text[-limit:]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
