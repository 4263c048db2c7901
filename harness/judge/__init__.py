"""The trusted side: runs in the parent process only, never beside candidate code.

Fuzz loop, oracle, checks, the timing schedule and its judgement, scoring and results. Nothing here is imported by
`harness.child` (tests/test_layout.py keeps it so), and nothing here trusts what a child says without checking it.
"""
