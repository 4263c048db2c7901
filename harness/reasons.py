"""Verdicts and the stable reason codes. Scripts and agent loops match on these strings: never rename one."""
from __future__ import annotations

from dataclasses import asdict, dataclass

VERDICTS = ("pass", "fail", "error", "timeout", "unsupported", "interrupted")

# code -> (verdict it implies, one-line meaning)
CODES = {
    "mismatch": ("fail", "values outside the tolerance against the fp64 oracle"),
    "nan_mismatch": ("fail", "NaN/Inf where the reference has none, or the other way round"),
    "wrong_shape": ("fail", "output shape differs from the reference's"),
    "wrong_dtype": ("fail", "output dtype differs from the reference's"),
    "wrong_device": ("fail", "output is not on the inputs' device"),
    "not_a_tensor": ("fail", "output is not a plain torch.Tensor (subclasses count as not a tensor)"),
    "output_aliases_input": ("fail", "output shares memory with an input"),
    "wrong_layout": ("fail", "output strides are not the layout the problem declares (contiguous by default)"),
    "output_retained": ("fail", "the output's memory is still held by the candidate after the call (module state, "
                                "or a buffer shared with another call's output)"),
    "input_mutated": ("fail", "an input changed during the call"),
    "out_of_bounds_write": ("fail", "the call wrote into the guard bands just before or after an input"),
    "stale_output": ("fail", "the answer belongs to an earlier call, not this one"),
    "forbidden_op": ("fail", "a non-torch backend computed with a library op (matmul, attention, ...)"),
    "tampering": ("fail", "the candidate patched the harness, torch's checking functions or the timers"),
    "background_work": ("fail", "threads, processes or GPU work still running after solve returned"),
    "below_roofline": ("fail", "a time faster than the hardware allows (FLOP/peak or bytes/bandwidth)"),
    "crash": ("error", "the candidate raised, or its process died"),
    "timeout": ("timeout", "the candidate ran past its wall-clock limit"),
    "import_error": ("error", "the solution file could not be imported, or breaks its format's contract "
                              "(BACKEND/solve; class ModelNew; custom_kernel)"),
    "nothing_judged": ("fail", "no dtype was judged: the solution's DTYPES share none with the problem's (or with "
                               "the dtypes asked for), so nothing it computes was checked"),
    "unsupported": ("unsupported", "the backend is not available on this device, or the file is of a kind Gauntlet "
                                   "cannot judge (C++ built with load_inline; no mapping of its format onto the "
                                   "problem): not a failure"),
    "interrupted": ("interrupted", "the judge was stopped (SIGINT, SIGTERM) before the judgement finished: it says "
                                   "nothing about the candidate"),
}

# When several reasons are found, the verdict is the most severe one's.
# An unfinished judgement outranks everything found before the stop: what was found is not a verdict on the rest.
_SEVERITY = {"pass": 0, "unsupported": 1, "fail": 2, "timeout": 3, "error": 4, "interrupted": 5}


@dataclass
class Reason:
    code: str
    detail: str
    repro: str = ""

    def __post_init__(self):
        if self.code not in CODES:
            raise ValueError(f"unknown reason code {self.code!r}; known: {', '.join(CODES)}")

    def to_json(self) -> dict:
        return asdict(self)


def verdict_of(reasons: list[Reason]) -> str:
    if not reasons:
        return "pass"
    return max((CODES[r.code][0] for r in reasons), key=_SEVERITY.__getitem__)
