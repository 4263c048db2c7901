"""The trusted side: runs in the parent process only, never beside candidate code. Nothing here is imported by
`gauntlet.child`, and nothing here trusts what a child says without checking it (tests/test_layout.py holds both).

One folder per concern, layered (tests/test_layout.py holds the order; each folder's docstring says what it may
import):
- evaluate.py, correctness.py, calls.py: one judgement, the entry point (`evaluate`) that everything above uses;
- timing/: how fast, against what;
- values/: is the answer right;
- records/: what a judgement leaves, and when it still stands;
- process/: the workers, seen from outside;
- sandbox/: how a worker is confined.
"""
