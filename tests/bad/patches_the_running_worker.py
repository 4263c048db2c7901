"""Known-bad: a correct answer, and at import a patch of the worker's own request handler, found wherever the
running Session class lives (the worker runs as `python -m gauntlet.child.worker`, so that used to be the
`__main__` module, which the tamper watch did not cover: the patch went unseen). The wrapper changes nothing
here, but one that did could rewrite any reply. The worker now runs the imported gauntlet.child.worker's code,
whose classes are watched.

Expected: tampering."""
import gc

import torch

BACKEND = "torch"
EXPECTED = "tampering"

# The class of the Session object that is serving requests (it is importing this file right now), found by
# walking the heap: whichever module it was defined in.
_session = next(type(o) for o in gc.get_objects()
                if type(o).__name__ == "Session" and hasattr(type(o), "run_case") and hasattr(o, "role"))
_original = _session.run_case


def _run_case(self, request, _original=_original):
    return _original(self, request)


_session.run_case = _run_case


def solve(a, b):
    return a @ b
