"""Every timed call's output, taken by the judge right after its batch's reply, and judged after the turn alone.

The worker writes each timed output into the judge's own GPU buffer (gauntlet.handoff; the reply's blobs where the
buffer cannot be mapped, copied out of the judge's sealed area on receipt). Right after the reply, with the worker
stopped (gauntlet.judge.timing.bench) and before it is asked anything else, `take` reads every call's output there
and keeps, per call, what the checks need (gauntlet.judge.values.sampled): its description, sampled rows and, for a
product, a random projection, all drawn now; and full copies of the few calls the schedule picks for a full check
(its spots). Nothing the worker does later can change them, and no request ever tells it which output is looked at:
all of them are. `judge`, after the turn alone (the card shared), regenerates each call's inputs from its seed and
checks them all; the first failing call is the verdict.

Problems without a `rows` hook in reference.py (their oracle cannot be computed on a few rows) get the projection
where they have `factors`, and otherwise only their structure per call and the full check of the spots.
"""
from __future__ import annotations

import random
from types import SimpleNamespace

import torch

from . import check, sampled
from ... import handoff, protocol
from ...inputs import make_inputs
from ...reasons import Reason


class BadOutputs(ValueError):
    """A batch reply's `outputs` do not have the shape the request implies (the candidate's process wrote it)."""


class TimedOutputs:
    """One timed (shape, dtype) of the candidate: the judge's buffer, and what it took from each call."""

    def __init__(self, problem, spec, shape: dict, expected, device: str):
        self.problem, self.spec, self.shape, self.device = problem, spec, shape, device
        self.dtype, self.out_shape = expected.dtype, tuple(expected.shape)
        self.nbytes = expected.torch_out.numel() * expected.torch_out.element_size()
        module = problem.module()
        self.has_rows, self.has_factors = hasattr(module, "rows"), hasattr(module, "factors")
        self.rng = random.SystemRandom()
        self.drop, self.sent = None, False
        self.drop_error = ""
        self.taken: list[dict] = []        # one per timed call of every batch
        self.copies: dict = {}             # call index in the last batch -> (header, [uint8 tensor])

    def handle(self, calls: int) -> dict | None:
        """What a batch of `calls` asks the worker for: a buffer of `calls` slots of the output's size, which the
        judge maps and reads (gauntlet.handoff); None off the GPU, or once the buffer could not be made or mapped
        (the outputs then come in the reply, and their copies cost the candidate's batches wall time that the
        second clock counts: the entry's `output_checks.via` says so)."""
        self.sent = self.device == "cuda" and not self.drop_error
        return {"slots": calls, "nbytes": self.nbytes} if self.sent else None

    def take(self, header: dict, blobs: list, calls: int, full: set) -> None:
        """Everything the checks need from each call of a batch, drawn now; whole copies of the calls in `full`.
        Then the buffer's slots are poisoned for the next batch."""
        outputs = header.get("outputs")
        if not (isinstance(outputs, list) and len(outputs) == calls):
            raise BadOutputs(f"'outputs' must describe the {calls} timed calls")
        self.copies = {}
        view = self._view(header, calls) if self.sent else None
        lost = self.sent and view is None          # their slots are in a buffer the judge could not map
        for k, out in enumerate(outputs):
            seed, meta = self._entry(out)
            kept = {"seed": seed, "meta": meta}
            if lost and meta["is_tensor"] and out.get("slot") is True:
                kept["unread"] = True
            values = self._values(k, out, meta, blobs, view) if meta["is_tensor"] and "unread" not in kept else None
            if values is not None:
                kept.update(self._draw(values))
                if k in full:
                    self.copies[k] = ({"seed": seed, "meta": meta, "wire": {"dtype": meta["dtype"],
                                       "shape": meta["shape"]}}, [values.reshape(-1).view(torch.uint8).clone()])
            elif k in full:
                self.copies[k] = ({"seed": seed, "meta": meta}, [])
            self.taken.append(kept)
        if view is not None:
            view.poison()

    def _view(self, header: dict, calls: int):
        """The worker's buffer, mapped at the first batch and the same one after; None where the worker could not
        make it or the judge could not map it at the first batch (a host without CUDA IPC: that batch's outputs go
        unread, the reply carries them from then on). A buffer that changes after one was mapped is refused."""
        handle = header.get("drop")
        if self.drop is not None:
            if handle != self.drop.handle:
                raise BadOutputs("the timing buffer's handle changed between batches")
            return self.drop
        if handle is None:
            self.drop_error = "the worker: " + str(header.get("drop_error") or "no buffer")[:300]
            return None
        try:
            self.drop = handoff.View(handle, calls, self.nbytes)
        except ValueError as exc:
            raise BadOutputs(str(exc)) from None
        except (handoff.HandoffError, RuntimeError) as exc:
            self.drop_error = f"the judge: {exc}"[:300]
        return self.drop

    def copy(self, index: int):
        """The full copy of call `index` of the last batch (header, blobs), as a spot check reads it."""
        return self.copies.get(index, ({}, []))

    @staticmethod
    def _entry(out):
        """(seed, meta) of one output entry, its types checked (the same contract as a correctness reply's)."""
        if not (isinstance(out, dict) and type(out.get("seed")) is int and 0 <= out["seed"] < 2**31):
            raise BadOutputs("each output needs its call's seed")
        m = out.get("meta")
        ints = lambda xs: isinstance(xs, list) and all(type(x) is int for x in xs)     # noqa: E731
        ok = isinstance(m, dict) and type(m.get("is_tensor")) is bool and (not m["is_tensor"] or (
            isinstance(m.get("dtype"), str) and ints(m.get("shape")) and all(x >= 0 for x in m["shape"])
            and ints(m.get("stride", [])) and all(isinstance(m.get(k), str)
                                                   for k in ("device", "device_type", "aliases_input"))))
        if not ok:
            raise BadOutputs("an output's 'meta' must describe it (dtype, shape, strides, device, aliasing)")
        return out["seed"], m

    def _values(self, k: int, out: dict, meta: dict, blobs: list, view):
        """Call k's values, the judge's own: its slot (read in place: the worker is stopped and asked nothing
        before the draw) or its blob; None where its dtype or shape is not the expected one (judged by `meta`)."""
        want = str(self.dtype).removeprefix("torch.")
        if meta["dtype"] != want or tuple(meta["shape"]) != self.out_shape:
            return None
        if out.get("slot") is True and view is not None and k < view.slots:
            raw = view.slot(k)
        elif type(out.get("blob")) is int and 0 <= out["blob"] < len(blobs):
            wire = out.get("wire")
            if not (isinstance(wire, dict) and wire.get("dtype") == want and wire.get("shape") == meta["shape"]):
                raise BadOutputs("an output's 'wire' must match its 'meta'")
            raw = protocol.tensor_from_wire(wire, blobs[out["blob"]]).reshape(-1).view(torch.uint8)
            raw = raw.to(self.device) if self.device == "cuda" else raw
        else:
            raise BadOutputs(f"call {k + 1}'s output is neither in its slot nor in the reply")
        return raw.view(self.dtype).view(self.out_shape)

    def _draw(self, values: torch.Tensor) -> dict:
        drawn = {}
        if self.has_rows:
            rows = sampled.draw_rows(self.out_shape, self.rng)
            drawn.update(rows=rows, row_values=sampled.take_rows(values, rows))
        if self.has_factors and values.dim() >= 2 and values.numel():
            drawn.update(sampled.project(values, self.rng.randrange(2**62)), dtype=self.dtype)
        return drawn

    def judge(self, record_repro=None) -> list[Reason]:
        """Every taken call checked (structure, sampled rows, projection); the first failing call's reasons."""
        like = SimpleNamespace(dtype=self.dtype, shape=self.out_shape)
        for i, kept in enumerate(self.taken):
            found = check.structural_reasons(kept["meta"], like, self.device, self.problem.output_layout)
            if not found and ("rows" in kept or "proj" in kept):
                inputs = make_inputs(self.problem, self.shape, self.spec, kept["seed"], self.device)
                if "rows" in kept:
                    found = sampled.rows_reasons(self.problem, self.spec, inputs, kept["rows"], kept["row_values"])
                if not found and "proj" in kept:
                    found = sampled.projection_reasons(self.problem, self.spec, inputs, kept)
                del inputs
            if found:
                for r in found:
                    r.detail = f"[timed call {i + 1} of {len(self.taken)}, {self.spec.name} {self.shape}] {r.detail}"
                    r.repro = record_repro(kept["seed"]) if record_repro else r.repro
                return found
        return []

    def summary(self) -> dict:
        """For the record: how many timed calls were taken (and how many of them could not be read: the first batch on
        a host without CUDA IPC), which checks they got, and how their outputs came."""
        return {"calls": len(self.taken), "unread": sum(1 for kept in self.taken if kept.get("unread")),
                "rows": self.has_rows, "projection": self.has_factors,
                "via": "reply (no shared buffer: " + self.drop_error + ")" if self.drop_error
                else "the worker's GPU buffer, mapped by the judge" if self.device == "cuda" else "reply"}

    def close(self) -> None:
        """The judge's mapping let go (before the worker frees its buffer: bench.Schedule.end)."""
        if self.drop is not None:
            self.drop.close()
            self.drop = None
        self.copies = {}
