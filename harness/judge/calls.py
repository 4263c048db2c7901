"""One correctness call, judged: the request to the candidate's worker, the judge's own inputs and oracle, and
every check of the reply (stale answers, guards, kernels, structure, values). `Judge` holds one candidate's state on
the trusted side; `CaseFailed` and `Abort` are how a call's verdict reaches the fuzz loop (gauntlet.judge.correctness).
"""
from __future__ import annotations

import collections
import secrets
import time
from dataclasses import dataclass, field

import torch

from .. import gpu, protocol
from ..inputs import make_inputs
from .process import kernels, replies
from .process.isolate import Child, ChildFailed
from .timing import turns
from .values import check, conventions, net, origin
from .values.oracle import expected_for
from ..problem import DtypeSpec, Problem
from ..protocol import digest
from ..reasons import Reason


class CaseFailed(AssertionError):
    """A call's output was judged wrong: Hypothesis shrinks towards a smaller failing case."""

    def __init__(self, reasons: list[Reason]):
        super().__init__("; ".join(f"{r.code}: {r.detail}" for r in reasons))
        self.reasons = reasons


class Abort(BaseException):  # noqa: N818 - BaseException on purpose: Hypothesis must not shrink through a dead child
    def __init__(self, reason: Reason):
        super().__init__(reason.detail)
        self.reason = reason


@dataclass
class Judge:
    """Per-candidate state on the trusted side: the child and recent expectations, to recognise stale answers."""
    problem: Problem
    child: Child
    device: str
    timeout: float = 180.0
    # (case key, expectation) of the current case's earlier calls, to recognise an answer that belongs to one of
    # them. Only the current case's: an expectation holds two float64 outputs, and those of earlier cases (other
    # keys, never compared) would only fill the GPU (gauntlet.judge.values.memory budgets calls_per_case of them).
    history: collections.deque = field(init=False)     # sized from the problem in __post_init__
    calls: int = 0
    kernels: dict = field(default_factory=dict)
    # Where a dtype's correctness time went, in seconds (the record's cases[dtype]["phases_s"]): the judge's inputs
    # and oracle, the request (the worker's inputs, the call and its checks, the output's way back), the judge's
    # checks of the reply (digests, the comparison); and the GiB of outputs that came back. Measured by the judge,
    # so a profile of the suite needs no other run.
    phases: dict = field(default_factory=dict)

    base: Child | None = None            # the clean baseline worker (cuda timing only)
    declared: frozenset = frozenset()    # the candidate's Triton kernel names, reported by its worker at start-up
    custom: bool = True                  # a non-torch backend: its work must be its own
    host_bound: bool = False             # a side starved with the host quiet: time on a quiet host (judge.timed)
    nonce: str = ""                      # the current call's (gauntlet.child.launches)

    def __post_init__(self):
        # The case's earlier calls, and no more: a new case may draw the same shape, and its expectations must not
        # pile up past the calls_per_case that gauntlet.judge.values.memory budgets.
        self.history = collections.deque(maxlen=max(1, self.problem.calls_per_case - 1))

    def run_call(self, shape: dict, spec: DtypeSpec, seed: int) -> list[Reason]:
        """A correctness call shares the card with other judges' (gauntlet.judge.timing.turns), never with a timed
        shape. Each judge sizes its cases to its share of the card's memory (gauntlet.judge.values.memory), but the
        shares are estimates read at different moments: a call that runs out of GPU memory (in the judge or in the
        worker) while other judges are on the card may have been pushed out by them, and a verdict caused by another
        judge must not stand. So it is made again once with the card to this judge alone (no other judge's call running
        beside it), a second later: a worker that took more than its share of the card is stopped by its judge's
        watchdog meanwhile (gauntlet.judge.process.watchdog), and its memory is free again. Running out again is the
        candidate's crash, as it is for a judge alone on the card."""
        try:
            with turns.sharing(self.device):
                return self._run_call(shape, spec, seed)
        except Abort as exc:
            if not turns.crowded_out(exc.reason, self.device):
                raise
        finally:
            if self.device == "cuda" and gpu.judges_per_gpu() > 1:
                # Sharing the card: between two calls hold only what the case still needs (its expectations), not
                # the allocator's reserve. Another judge may time a shape next, with benchmark inputs sized to no
                # share, and a reserve is memory its workers cannot have (gauntlet.judge.timing.timed._time_shape).
                torch.cuda.empty_cache()
        self.release()
        time.sleep(1.0)        # a worker beside it past its share of the card is stopped within a poll meanwhile
        with turns.alone(self.device):
            return self._run_call(shape, spec, seed)

    def release(self) -> None:
        """Forget the current case's expectations and hand the allocator's reserve back: at a new case, before a
        call made again alone, and when a dtype's correctness is over (before timing, whose inputs are fixed
        benchmark shapes sized to no share and need the room, in this judge's worker and in the card's other
        judges')."""
        self.history.clear()
        if self.device == "cuda":
            torch.cuda.empty_cache()

    def _run_call(self, shape: dict, spec: DtypeSpec, seed: int) -> list[Reason]:
        key = (spec.name, tuple(sorted(shape.items())))
        if any(k != key for k, _ in self.history):
            # A new case: free the last one's expectations before building any, and hand the cached blocks back:
            # sizes change from case to case, so the caching allocator's reserve would otherwise grow past this
            # judge's share (gauntlet.judge.values.memory), and the candidate's worker on the same GPU would run out
            # of memory building its inputs, beside other judges.
            self.release()
        phases = self.phases.setdefault(spec.name, {"expect": 0.0, "request": 0.0, "check": 0.0, "output_gib": 0.0})
        t0 = time.monotonic()
        try:
            # The judge's side first: the expected output's size caps what the reply may carry.
            inputs = make_inputs(self.problem, shape, spec, seed, self.device)
            expected = expected_for(self.problem, inputs, spec)
        except torch.OutOfMemoryError:
            raise Abort(Reason("crash", "the judge ran out of GPU memory while the candidate's process held it "
                                        f"(on {shape})")) from None
        finally:
            t1 = time.monotonic()
            phases["expect"] += t1 - t0
        try:
            self.calls += 1
            # A fresh nonce per call names the interpreter's launch ranges (gauntlet.child.launches): no range name
            # is right before the call has begun.
            self.nonce = secrets.token_hex(8)
            header, blobs = self.child.request({"op": "case", "shape": shape, "dtype": spec.name, "seed": seed,
                                                "nonce": self.nonce},
                                               timeout=self.timeout, what=f"running solve on {shape}",
                                               max_blob=replies.blob_cap(expected.oracle.numel()))
        except ChildFailed as exc:
            raise Abort(exc.reason) from None
        finally:
            t2 = time.monotonic()
            phases["request"] += t2 - t1
        try:
            phases["output_gib"] += sum(len(b) for b in blobs) / 2**30
            return self._judge_reply(header, blobs, inputs, expected, shape, spec, key)
        except torch.OutOfMemoryError:   # the comparison's temporaries: judged as any judge-side shortage is
            raise Abort(Reason("crash", "the judge ran out of GPU memory checking the reply while the candidate's "
                                        f"process held it (on {shape})")) from None
        finally:
            phases["check"] += time.monotonic() - t2

    def _judge_reply(self, header, blobs, inputs, expected, shape, spec, key) -> list[Reason]:
        if not header.get("ok"):
            raise Abort(Reason("crash", str(header.get("detail", ""))))     # a worker only ever reports a crash
        try:
            replies.case(header, len(blobs), len(inputs))
        except replies.BadReply as exc:
            raise Abort(Reason("tampering", f"malformed reply from the candidate's process: {exc}")) from None
        # What ran, over every case of the dtype (for the record: it shows which of a kernel's paths, TMA or its
        # pointer fallback, split-K or not, the fuzzing reached; the first case alone is an odd-sized edge).
        seen = self.kernels.setdefault(spec.name, [])
        seen += [k for k in kernels.summary(header["calls"]) if k not in seen][:max(0, 20 - len(seen))]
        reasons = self._guard_reasons(header, inputs, expected, shape)
        reasons += check.structural_reasons(header["meta"], expected, self.device, self.problem.output_layout)
        if not reasons:
            out = protocol.tensor_from_wire(header["wire"], blobs[0]).to(self.device)
            value = conventions.value_reasons(out, expected, spec)     # any admitted quantization convention
            if value and self._is_stale(out, key, spec):
                value = [Reason("stale_output", "the output matches the answer to an earlier call with other "
                                                "inputs, not this call's")]
            # The statistics judge an answer that is within the tolerance; one that is not is judged already.
            reasons += value or self._value_statistics(out, inputs, expected, shape, spec)
        reasons += check.retained_reasons(header["meta"])
        self.history.append((key, expected))
        return reasons

    def _value_statistics(self, out, inputs, expected, shape, spec: DtypeSpec) -> list[Reason]:
        """What the values say beyond the tolerance: at the float32 net case, error statistics (values.net); for a
        non-torch backend, an output that is torch's own bit for bit (values.origin), whatever the reply says."""
        exact_case = bool(getattr(expected, "exact_case", False))
        found = net.reasons(out, expected) if net.applies(self.problem, self.device, shape, spec, exact_case) else []
        control = getattr(self.problem.module(), "sequential_order", None)
        if self.custom and callable(control) and not isinstance(expected, conventions.Admissible):
            found += origin.library_reasons(out, expected, exact_case or spec.exact, lambda: control(*inputs))
        return found

    def _is_stale(self, out: torch.Tensor, key, spec: DtypeSpec) -> bool:
        """A wrong output that passes against an earlier call's expectations of the same case shape. Outputs of a
        few elements can match an earlier answer by chance, exact (integer) ones and floating ones alike: in CI a
        split-K kernel with a bf16 running sum (tests/bad/ksplit_bf16_accumulate_short_k.py) gave a wrong 1x1 gemm
        output that fell within an earlier call's element-wise budget. So those need 16 or more; below that the
        output is judged a mismatch, a failure all the same."""
        if out.numel() < 16:
            return False
        return any(k == key and conventions.matches(out, old, spec) for k, old in self.history)

    def _guard_reasons(self, header: dict, inputs: tuple, expected, shape: dict) -> list[Reason]:
        reasons = []
        changed = header.get("tampering", []) + header.get("state", [])
        if changed:
            reasons.append(Reason("tampering", "changed during solve: " + ", ".join(changed[:10])))
        if self.custom:
            # An empty product (K=0, say) has nothing to compute: a fill is a right answer, not a borrowed one.
            need_own = expected.oracle.numel() > 0 and self.problem.flops(shape) > 0 and (
                self.device == "cuda" or self.child.backend == "triton")
            found = kernels.call_problems(header["calls"][0], self.device, self.declared, timed=False,
                                          need_own=need_own)
            if self.device == "cpu" and header["calls"][0].get("nonce", self.nonce) != self.nonce:
                found.append("the call's profile carries another call's nonce (a replayed or forged reply)")
            if found:
                reasons.append(Reason("forbidden_op", "; ".join(found)))
        if header.get("background"):
            reasons.append(Reason("background_work", header["background"]))
        escaped = self.child.escaped()
        if escaped:
            reasons.append(Reason("background_work", f"process(es) {escaped[:5]} escaped the candidate's process "
                                                     "group and are still running"))
        if header.get("bands_changed"):
            reasons.append(Reason("out_of_bounds_write", f"input(s) {header['bands_changed']}: the call wrote into "
                                                         "the memory just before or after them"))
        mutated = [i for i, (x, d) in enumerate(zip(inputs, header.get("input_digests", []))) if digest(x) != d]
        if mutated or len(header.get("input_digests", [])) != len(inputs):
            reasons.append(Reason("input_mutated", f"input(s) {mutated} differ from their pristine copies after "
                                                   "the call"))
        return reasons
