"""`gauntlet report`: the leaderboard (Markdown + HTML) from results files; and `gauntlet compare`: did a kernel get
slower or wrong? two runs compared (gauntlet.reports.compare). Both only read results files."""
from __future__ import annotations

import sys
from pathlib import Path

from . import output
from ..discover import UsageError


def add(sub) -> None:
    add_compare(sub)          # `gauntlet --help` lists compare before report
    rep = sub.add_parser("report", help="leaderboard (Markdown + HTML) from results files")
    rep.add_argument("results", nargs="+", metavar="RESULTS.json",
                     help="results files written by `gauntlet run --out`, `gauntlet eval --json` output or "
                          "`gauntlet eval-many` lines (a later file's record of the same problem/solution/device "
                          "replaces an earlier one's; different GPUs are ranked apart)")
    rep.add_argument("-o", "--out-dir", default="reports/out",
                     help="where leaderboard.md and leaderboard.html are written (default reports/out)")
    rep.add_argument("--json", action="store_true", help="print one JSON object (the files written), no table")
    rep.add_argument("--compare", action="store_true",
                     help="with exactly two files, BASE then NEW: both pages also carry `gauntlet compare BASE NEW`'s "
                          "table (the leaderboard shows NEW over BASE; the exit status stays 0: use `gauntlet "
                          "compare` to gate CI)")
    rep.add_argument("--fail-on", type=float, default=None, metavar="PCT",
                     help="with --compare: the slowdown, in percent, beyond which a real one is flagged (default 5)")
    rep.set_defaults(func=run)


def run(args) -> int:
    from ..reports.leaderboard import build, markdown_table, read_run
    compare = getattr(args, "compare", False)      # `run --report` calls this with results and out_dir only
    if compare and len(args.results) != 2:
        raise UsageError(f"--compare takes exactly two results files, BASE then NEW; got {len(args.results)}")
    fail_on = getattr(args, "fail_on", None)
    if fail_on is not None and not compare:
        raise UsageError("--fail-on is a threshold of --compare: give both, or neither")
    fail_on = 5.0 if fail_on is None else fail_on
    if not 0 <= fail_on < 1000:
        raise UsageError(f"--fail-on must be a percentage in [0, 1000), got {fail_on}")
    out = build(args.results, args.out_dir, compare=compare, fail_on=fail_on)
    if getattr(args, "json", False):
        output.emit_json({"schema": "gauntlet.report/1", "markdown": str(out["markdown"]), "html": str(out["html"]),
                          "rows": out["rows"],
                          "regressions": len(out["compare"]["regressions"]) if out["compare"] is not None else None})
        return 0
    print(markdown_table([read_run(Path(p)) for p in args.results]))
    print(f"\nwrote {out['markdown']} and {out['html']}", file=sys.stderr)
    return 0


def add_compare(sub) -> None:
    cmp_ = sub.add_parser("compare", help="did a kernel get slower or wrong? two runs compared (results files, "
                                          "eval --json output or eval-many lines); exit 1 on a regression")
    cmp_.add_argument("base", help="the reference run (e.g. the main branch's stored results)")
    cmp_.add_argument("new", help="the run to judge")
    cmp_.add_argument("--fail-on", type=float, default=5.0, metavar="PCT",
                      help="a slowdown beyond PCT percent whose 95%% interval excludes no change is a regression "
                           "(default 5)")
    cmp_.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    cmp_.add_argument("--markdown", metavar="FILE", help="also write the Markdown (a PR comment) to FILE")
    cmp_.set_defaults(func=run_compare)


def run_compare(args) -> int:
    """gauntlet.reports.compare: a regression is a slowdown beyond --fail-on whose interval says it is real, or a pass
    that is no longer one. Exit 1 on any, 0 otherwise."""
    from ..reports import compare
    if not 0 <= args.fail_on < 1000:
        raise UsageError(f"--fail-on must be a percentage in [0, 1000), got {args.fail_on}")
    doc = compare.compare(compare.load(Path(args.base)), compare.load(Path(args.new)), args.fail_on)
    text = compare.markdown(doc, (args.base, args.new))
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        output.emit_json(doc)
    else:
        print(text)
    return 1 if doc["regressions"] else 0
