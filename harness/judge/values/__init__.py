"""Is the answer right? Hypothesis' cases over a problem's domain, the fp64 oracle, the comparison and its budget,
quantization conventions, a case's memory, the failing cases kept for replay, and every timed output's checks.

May import: the shared harness modules (gauntlet.problem, gauntlet.inputs, gauntlet.protocol, gauntlet.handoff, ...)
only; nothing else of the judge (a leaf: timing and the judgement use it, it uses neither)."""
