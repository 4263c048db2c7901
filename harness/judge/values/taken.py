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
        """The buffer's handle for a batch of `calls` (made at the first batch), its slots poisoned; None off the
        GPU, or where the judge could not share it or the worker could not map it (the outputs then come in the
        reply, and its copies cost the candidate's batches wall time that the second clock counts)."""
        self.sent = False                  # a slot is read only in a batch whose request carried the handle
        if self.device != "cuda" or self.drop_error:
            self.drop = None
            return None
        if self.drop is None or self.drop.slots < calls:
            self.drop = None
            try:
                self.drop = handoff.Drop(calls, self.nbytes, self.device)
            except (RuntimeError, AttributeError, torch.OutOfMemoryError) as exc:
                self.drop_error = f"{type(exc).__name__}: {exc}"[:300]
                return None
        self.drop.poison()
        self.sent = True
        return self.drop.handle

    def take(self, header: dict, blobs: list, calls: int, full: set) -> None:
        """Everything the checks need from each call of a batch, drawn now; full copies of the calls in `full`."""
        outputs = header.get("outputs")
        if not (isinstance(outputs, list) and len(outputs) == calls):
            raise BadOutputs(f"'outputs' must describe the {calls} timed calls")
        self.copies = {}
        refused = header.get("drop_error")
        if refused and not self.drop_error:          # the worker could not map the buffer: the reply carries them
            self.drop_error = "the worker: " + str(refused)[:300]
        for k, out in enumerate(outputs):
            seed, meta = self._entry(out)
            kept = {"seed": seed, "meta": meta}
            values = self._values(k, out, meta, blobs) if meta["is_tensor"] else None
            if values is not None:
                kept.update(self._draw(values))
                if k in full:
                    self.copies[k] = ({"seed": seed, "meta": meta, "wire": {"dtype": meta["dtype"],
                                       "shape": meta["shape"]}}, [values.reshape(-1).view(torch.uint8).clone()])
            elif k in full:
                self.copies[k] = ({"seed": seed, "meta": meta}, [])
            self.taken.append(kept)

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

    def _values(self, k: int, out: dict, meta: dict, blobs: list):
        """Call k's values, the judge's own: its slot (read in place: the worker is stopped and asked nothing
        before the draw) or its blob; None where its dtype or shape is not the expected one (judged by `meta`)."""
        want = str(self.dtype).removeprefix("torch.")
        if meta["dtype"] != want or tuple(meta["shape"]) != self.out_shape:
            return None
        if out.get("slot") is True and self.sent and self.drop is not None and k < self.drop.slots:
            raw = self.drop.slot(k)
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
        """For the record: how many timed calls were checked, which checks they got, and how their outputs came."""
        return {"calls": len(self.taken), "rows": self.has_rows, "projection": self.has_factors,
                "via": "reply (the judge's buffer could not be shared: " + self.drop_error + ")" if self.drop_error
                else "the judge's GPU buffer" if self.device == "cuda" else "reply"}

    def close(self) -> None:
        self.drop = None
        self.copies = {}
