"""Runs beside candidate code, in a spawned worker process: the worker loop, in-process guards, the timing loop.

Everything here is reachable by the candidate (it shares the process), so nothing here decides a verdict: it only
measures and reports, and the parent (`gauntlet.judge`) checks what it reports. Only shared modules
(`gauntlet.protocol`, `gauntlet.problem`, `gauntlet.inputs`, `gauntlet.discover`, `gauntlet.backends`) are imported.
"""
