"""Gauntlet: hold GPU kernels to a specification.

One module per concern: discover (find problems and solutions), problem (load and validate them), fuzz (Hypothesis
shapes), oracle + check (correctness against fp64), isolate + worker + protocol (the candidate's own process),
guard (in-child checks), timing + scoring (speed), results (records and files), evaluate (one candidate, end to
end), cli and plugin (the two front doors).
"""
__version__ = "0.1.0"
