"""The child process: imports one candidate and runs it on request. It judges nothing.

Started by harness.isolate as `python -m harness.worker REQ_FD RESP_FD PROBLEM SOLUTION_PATH BACKEND DEVICE`, with
its stdout/stderr sent to a log file, so whatever the candidate prints never reaches the channel or the CLI's
JSON. For each request it regenerates the inputs from the seed it is given, calls solve, and sends back the output
bytes plus what the in-process guards saw. The parent computes every verdict.
"""
from __future__ import annotations

import sys
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
            self.problem = discover.get_problem(self.problem_id)
            self.problem.module()
            backends.after_import(self.backend, self.device)
        except Exception:  # noqa: BLE001
            return {"ok": False, "code": "crash", "detail": "harness start-up failed:\n" + _tb()}
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
        recorder = guard.OpRecorder() if self.backend != "torch" else None
        threads = guard.live_threads()
        with matmul_precision(spec), torch.no_grad():
            if recorder is not None:
                with recorder:
                    out = self.solve(*inputs)
            else:
                out = self.solve(*inputs)
            if self.device == "cuda":
                torch.cuda.synchronize()
        header = {"ok": True, "meta": guard.describe_output(out, inputs),
                  "input_digests": [guard.digest(x) for x in inputs],
                  "forbidden_ops": recorder.forbidden if recorder else [],
                  "tampering": self.watch.changed(), "background": guard.background_work(threads)}
        if not header["meta"]["is_tensor"]:
            return header, []
        meta, blob = protocol.tensor_to_wire(out)
        header["wire"] = meta
        return header, [blob]

    def run_timing(self, request: dict):
        import torch

        from harness import timing
        from harness.oracle import matmul_precision
        from harness.problem import load_module
        spec = self.problem.dtype(request["dtype"])
        sets = [self._inputs(request, seed)[1] for seed in request["seeds"]]
        sides, notes = {"candidate": self.solve}, {}
        for label, path in request["baselines"].items():
            module = load_module(path, f"gauntlet_baseline_{label}")
            sides[label] = module.solve
            notes[label] = _describe(module, sets[0])
        with matmul_precision(spec), torch.no_grad():
            result = timing.time_sides(sides, sets, reps=request.get("reps", 50), seed=request["order_seed"],
                                       budget_s=request.get("budget_s", 20.0))
        header = {"ok": True, "sides": {}, "tampering": self.watch.changed()}
        blobs = []
        cand = result["candidate"]
        for label, r in result.items():
            side = {"error": r["error"]} if "error" in r else {"ms": r["ms"], "wall_ms": r["wall_ms"], "mode": r["mode"]}
            header["sides"][label] = dict(side, note=notes.get(label, ""))
        out = cand["last_out"]
        if type(out) is torch.Tensor:   # noqa: E721
            meta, blob = protocol.tensor_to_wire(out)
            header["spot"] = {"seed": request["seeds"][cand["last_set"]], "wire": meta}
            blobs.append(blob)
        return header, blobs


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
