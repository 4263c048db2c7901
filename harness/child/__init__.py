"""Runs beside candidate code, in a spawned worker process: the worker loop, in-process guards, the timing loop.

Everything here is reachable by the candidate (it shares the process), so nothing here decides a verdict: it only
measures and reports, and the parent (`harness.judge`) checks what it reports. Only shared modules
(`harness.protocol`, `harness.problem`, `harness.inputs`, `harness.discover`, `harness.backends`) are imported.
"""
