"""Fingerprints of harness data that compare without running candidate code (gauntlet.child.state,
gauntlet.child.guard).

Why: comparing a harness value with its snapshot through `==` or `!=` calls the operands' own methods, and Python
asks a subclass first. A candidate that rebinds a module-level string (the profiler's launch mark, say) to an
instance of a `str` subclass whose `__eq__`/`__ne__` say "equal" to anything would pass any such comparison, and
`isinstance(value, str)` accepts the subclass. So a fingerprint here is built only from values of exact builtin
types (`type(x) is str`, never isinstance), nested in tuples the harness builds itself; everything else is named by
its identity (`id` of the object and of its type). Two fingerprints then compare with the builtin types' own
methods alone, and a string rebound to a subclass instance reads as changed, whatever that instance claims.

What this does not do: it runs in the candidate's process, like every in-process check. A candidate can still
rewrite the snapshot itself, or this module's code; the tamper watch raises the cost of that (it watches this
module's functions by identity), it does not prove anything.
"""
from __future__ import annotations

import types

MAX_ITEMS = 4096            # values fingerprinted per data item; a longer container is compared on its first ones
_SCALARS = (str, int, float, bytes, bool, type(None))
_CONTAINERS = (tuple, list, dict, set, frozenset)
_id, _type, _repr, _sorted = id, type, repr, sorted     # bound at import: a later patch of builtins is not used


def identity(value) -> tuple:
    """An object named by what it is, not by what it says: its id and its type's id."""
    return ("object", _id(_type(value)), _id(value))


def fingerprint(value) -> tuple:
    """A value's fingerprint: scalars and containers of exact builtin types by value (a float by its hex spelling,
    so a NaN equals itself), anything else by identity. Built of exact tuples, strings and ints only, so two
    fingerprints compare with builtin methods."""
    return _canon(value, [MAX_ITEMS], 0)


def _canon(value, budget: list, depth: int) -> tuple:
    kind = _type(value)
    budget[0] -= 1
    if budget[0] < 0 or depth > 16:
        return ("more",)
    if kind is float:
        return ("float", float.hex(value))
    if kind in _SCALARS:
        return (kind.__name__, value)
    if kind is tuple or kind is list:
        return (kind.__name__, tuple(_canon(v, budget, depth + 1) for v in value))
    if kind is dict:
        return ("dict", tuple((_canon(k, budget, depth + 1), _canon(v, budget, depth + 1)) for k, v in value.items()))
    if kind is set or kind is frozenset:
        # iteration order follows hashes and history: sort the (builtin-only) fingerprints by their spelling
        return (kind.__name__, tuple(_sorted((_canon(v, budget, depth + 1) for v in value), key=_repr)))
    return identity(value)


def is_data(value) -> bool:
    """Whether a module or class attribute is data the state snapshot compares (gauntlet.child.state): anything but
    code, classes and modules, whose identity the tamper watch follows (gauntlet.child.guard)."""
    return not (callable(value) or isinstance(value, (type, types.ModuleType, staticmethod, classmethod, property)))


def same(a: tuple, b: tuple) -> bool:
    """Two fingerprints (from `fingerprint`) are equal. Both are builtin-only structures; the exact-type test keeps a
    value that did not come from here from being compared through its own methods."""
    return _type(a) is tuple and _type(b) is tuple and a == b
