"""The `gauntlet` command: one module per command (list, eval, eval_many, run, compare, report, mutate), each
with its parser (`add`) and its body (`run`); options.py and output.py hold what they share; main.py reads the
command line and hands it to one (the package itself holds no code: a command module named `list` or `eval`,
imported, would shadow the builtin in it).

Exit codes (scripts and agent loops depend on them): 0 pass, 1 rejected (any verdict but pass; for `run`, any
shipped solution that neither passed nor was unsupported), 2 usage error (unknown problem, missing file, bad flag),
3 internal error (a bug in Gauntlet, said as such with its traceback), 130 stopped by SIGINT and 143 by SIGTERM
(128 + the signal, as a shell reports it; gauntlet.judge.records.interrupt).
"""
from .main import main  # noqa: F401 - the `gauntlet` console script (pyproject.toml)
