"""`gauntlet compare`: did a kernel get slower or wrong? Two runs compared (gauntlet.reports.compare)."""
from __future__ import annotations

from pathlib import Path

from . import output
from ..discover import UsageError


def add(sub) -> None:
    cmp_ = sub.add_parser("compare", help="did a kernel get slower or wrong? two runs compared (results files, "
                                          "eval --json output or eval-many lines); exit 1 on a regression")
    cmp_.add_argument("base", help="the reference run (e.g. the main branch's stored results)")
    cmp_.add_argument("new", help="the run to judge")
    cmp_.add_argument("--fail-on", type=float, default=5.0, metavar="PCT",
                      help="a slowdown beyond PCT percent whose 95%% interval excludes no change is a regression "
                           "(default 5)")
    cmp_.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    cmp_.add_argument("--markdown", metavar="FILE", help="also write the Markdown (a PR comment) to FILE")
    cmp_.set_defaults(func=run)


def run(args) -> int:
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
