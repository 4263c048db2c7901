"""`gauntlet mutate`, a tool that uses the judge: small honest-looking bugs planted in a Triton solution's kernels
(mutants), each judged as a candidate, and the share the correctness net catches (mutate).

May import: the judge's entry point (gauntlet.judge.evaluate: where the mutants' failing cases go is one of its
Options) and the shared harness modules."""
