"""The candidate's and the baseline's worker processes, seen from outside: starting and stopping them (isolate),
their process trees (pids), environment and bytecode, their replies (data, checked), what their profiled calls
ran (kernels), their resources (watchdog), their writes into the source tree (audit), workers started ahead of
need (standby), and the judge's cache folder.

May import: gauntlet.judge.sandbox (how a worker is confined) and the shared harness modules; nothing else of the
judge."""
