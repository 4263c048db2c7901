"""Which Triton-interpreter launch ranges in a call's profile the harness opened (on the CPU, where they are how the
judge knows that a Triton solution ran a kernel of its own: gauntlet.judge.process.kernels).

The rule. The harness's launch wrapper (gauntlet.backends.triton_interpreter.mark_launches) names each range it opens
`gauntlet::launch::<nonce>/<n>::<kernel>` and records n here, in this call's ledger. The nonce is chosen by the judge
for each call and sent in its request, so no name is right before the call starts; n counts the call's launches. In
the profile (gauntlet.child.profiling), a range counts as the harness's only if it carries this call's nonce, its n is
in the ledger, no other range carries the same n, and it does not sit inside another launch range on its thread (the
interpreter never launches from inside a launch). Any other range under the launch prefix is reported as forged, and
the judge rules it `forbidden_op`. A range hides nothing either way: the aten ops inside every range are judged by the
allowlist like any other op (the interpreter itself runs only allocation, copy and cast ops there).

What a forger with full control of its process can still do: read the nonce and the counter from this module while
its solve runs, and open a range under the next number (or write into the ledger) before the harness does; then its
range reads as the harness's, and the judge believes a kernel was launched. That is all it buys: the ops it runs
inside are still on the allowlist's account, and work done by torch's library shows in the values themselves
(gauntlet.judge.values.origin), which no reply field can change.
"""
from __future__ import annotations

from ..backends.triton_interpreter import LAUNCH_PREFIX as PREFIX
NO_CALL = "-"               # the nonce outside a judged call (start-up, timing): such ranges are never the harness's
_CALL = {"nonce": NO_CALL, "opened": {}}     # this call's nonce, and n -> label for each range the wrapper opened


def begin(nonce) -> None:
    """Start a call's ledger under the judge's nonce (a short string of letters and digits)."""
    ok = type(nonce) is str and 0 < len(nonce) <= 64 and nonce.isalnum()
    _CALL["nonce"], _CALL["opened"] = (nonce if ok else NO_CALL), {}


def opened(label: str) -> str:
    """The name for the range the wrapper is about to open, recorded in the ledger."""
    n = len(_CALL["opened"])
    _CALL["opened"][n] = label
    return f"{PREFIX}{_CALL['nonce']}/{n}::{label}"


def end() -> tuple[str, dict]:
    """This call's nonce and ledger; the module goes back to no call."""
    nonce, ledger = _CALL["nonce"], _CALL["opened"]
    _CALL["nonce"], _CALL["opened"] = NO_CALL, {}
    return nonce, ledger


def sort(ranges: list, nonce: str, ledger: dict) -> tuple[list, list]:
    """(the harness's launches as kernel labels, forged range names) from the launch-prefixed ranges of one call's
    profile, each (start ns, end ns, thread, full name), by the rule in the module docstring."""
    seen: dict = {}
    for r in ranges:
        n = _number(r[3], nonce)
        seen[n] = seen.get(n, 0) + 1
    own, forged = [], []
    for a, b, t, name in ranges:
        n = _number(name, nonce)
        nested = any(t == t2 and a2 <= a and b <= b2 and (a2, b2) != (a, b) for a2, b2, t2, _ in ranges)
        if n is not None and n in ledger and seen[n] == 1 and not nested:
            own.append(ledger[n])
        else:
            forged.append(name[:200])
    return own, forged


def _number(name: str, nonce: str):
    """The n of a range named under this call's nonce, else None."""
    head = f"{PREFIX}{nonce}/"
    if nonce == NO_CALL or not name.startswith(head):
        return None
    digits = name[len(head):].split("::", 1)[0]
    return int(digits) if digits.isdigit() and len(digits) < 9 else None
