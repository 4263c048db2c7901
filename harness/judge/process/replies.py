"""A child's reply is data: every header is checked against the shape the parent asked for before anything reads
it. A violation is `tampering` (the candidate's process wrote something the harness never would), never a harness
crash or a usage error. Blob sizes are capped when the reply is read (gauntlet.judge.process.isolate, max_blob).
"""
from __future__ import annotations

import math


def blob_cap(numel: int) -> int:
    """The most output bytes a reply may carry for an expected output of `numel` elements: generous enough that a
    wrongly shaped output is still read and judged `wrong_shape`, bounded so that a flood is `tampering` instead of
    filling the judge's memory."""
    return 64 * numel + (16 << 20)


class BadReply(ValueError):
    """The reply does not have the shape the request implies."""


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise BadReply(what)


def _number_list(header: dict, key: str, n: int, positive: bool = False) -> list[float]:
    xs = header.get(key)
    _need(isinstance(xs, list) and len(xs) == n, f"{key!r} must be a list of {n} numbers")
    for x in xs:
        _need(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
              and (x > 0 or not positive), f"{key!r} holds {x!r}, not a finite {'positive' if positive else ''} "
                                          "number")
    return xs


def _strings(value, what: str, limit: int = 10_000) -> None:
    _need(isinstance(value, list) and len(value) <= limit and all(isinstance(s, str) for s in value),
          f"{what} must be a list of strings")


def calls(header: dict, n: int) -> list[dict]:
    """The profiler's per-call observations: n entries of kernels [[name, us]], ops [str], launches [str]."""
    cs = header.get("calls")
    _need(isinstance(cs, list) and len(cs) == n, f"'calls' must list {n} calls")
    for c in cs:
        _need(isinstance(c, dict), "a call entry must be an object")
        ks = c.get("kernels", [])
        _need(isinstance(ks, list) and len(ks) <= 100_000, "'kernels' must be a list")
        for k in ks:
            _need(isinstance(k, list) and len(k) == 2 and isinstance(k[0], str) and isinstance(k[1], (int, float))
                  and math.isfinite(k[1]) and k[1] >= 0, f"kernel entry {k!r} is not [name, microseconds]")
        _strings(c.get("ops", []), "'ops'")
        _strings(c.get("launches", []), "'launches'")
        _strings(c.get("compiled", []), "'compiled'")
        _strings(c.get("forged_launches", []), "'forged_launches'")
        _need(isinstance(c.get("nonce", ""), str), "'nonce' must be a string")
        _need(c.get("marked") is True, "a call's profiler mark is missing (was the profiler stopped?)")
    return cs


def meta(m, what: str = "'meta'") -> dict:
    _need(isinstance(m, dict) and isinstance(m.get("is_tensor"), bool), f"{what} must describe the output")
    if m["is_tensor"]:
        _need(isinstance(m.get("dtype"), str) and isinstance(m.get("shape"), list)
              and all(isinstance(s, int) and s >= 0 for s in m["shape"]) and isinstance(m.get("device"), str)
              and isinstance(m.get("device_type"), str) and isinstance(m.get("aliases_input"), str)
              and isinstance(m.get("retained", False), bool)
              and isinstance(m.get("stride", []), list) and all(isinstance(s, int) for s in m.get("stride", [])),
              f"{what} of a tensor needs dtype, shape, device and aliasing")
    return m


def wire(header: dict, nblobs: int) -> None:
    if meta(header.get("meta"))["is_tensor"]:
        w = header.get("wire")
        _need(isinstance(w, dict) and w.get("dtype") == header["meta"]["dtype"]
              and w.get("shape") == header["meta"]["shape"], "'wire' must match 'meta'")
        _need(nblobs == 1, f"a tensor output comes as one blob, got {nblobs}")
    else:
        _need(nblobs == 0, "a non-tensor output comes with no blob")


def case(header: dict, nblobs: int, n_inputs: int) -> None:
    """The reply to a correctness call."""
    wire(header, nblobs)
    digests = header.get("input_digests")
    _need(isinstance(digests, list) and len(digests) == n_inputs and all(isinstance(d, str) for d in digests),
          f"'input_digests' must hold {n_inputs} strings")
    _strings(header.get("tampering", []), "'tampering'")
    _strings(header.get("state", []), "'state'")
    _need(isinstance(header.get("background", ""), str), "'background' must be a string")
    bands = header.get("bands_changed", [])
    _need(isinstance(bands, list) and all(type(i) is int and 0 <= i < n_inputs for i in bands),
          f"'bands_changed' must list input indices below {n_inputs}")
    calls(header, 1)


def setup(header: dict, labels: list[str]) -> dict:
    sides = header.get("sides")
    _need(isinstance(sides, dict) and sorted(sides) == sorted(labels), f"'sides' must be exactly {labels}")
    for label, side in sides.items():
        _need(isinstance(side, dict), f"side {label!r} must be an object")
        if "error" in side:
            _need(isinstance(side["error"], str), "an error must be a string")
            continue
        for key in ("probe_ms", "host_ms"):
            x = side.get(key)
            _need(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0, f"{label}.{key} is {x!r}")
        _need(type(side.get("waits_for_gpu", False)) is bool, f"{label}.waits_for_gpu must be true or false")
    return sides


def batch(header: dict, n: int) -> None:
    """The reply to `n` timed calls."""
    _number_list(header, "ms", n, positive=True)
    _number_list(header, "host_ms", n)
    _number_list(header, "flush_ms", n)
    calls(header, n)
    shared = header.get("shared_outputs", 0)
    _need(type(shared) is int and 0 <= shared <= n, f"'shared_outputs' is {shared!r}, not a count of <= {n} calls")
    _need(isinstance(header.get("background", ""), str), "'background' must be a string")
    _strings(header.get("state", []), "'state'")


def spot(header: dict, nblobs: int) -> None:
    _need(isinstance(header.get("seed"), int) and 0 <= header["seed"] < 2**31, "'seed' must be the call's seed")
    wire(header, nblobs)
