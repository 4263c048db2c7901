"""`gauntlet list`: problems, dtypes, solutions, and which backends this machine can run."""
from __future__ import annotations

import sys

from .. import backends, discover
from . import options, output
from ..discover import UsageError
from ..problem import ProblemError


def add(sub) -> None:
    ls = sub.add_parser("list", help="problems, dtypes, solutions, and which backends this machine can run")
    options.search_options(ls)
    ls.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    ls.set_defaults(func=run)


def run(args) -> int:
    doc = _listing()
    if args.json:
        output.emit_json(doc)
    else:
        _print_listing(doc)
    if doc["broken"]:
        print(f"gauntlet: {len(doc['broken'])} problem(s) could not be loaded", file=sys.stderr)
        return 2
    return 0


def _listing() -> dict:
    """What `list` says, as data: backends per device, the search path, every problem with its solutions, and the
    problems that could not be loaded (one broken problem.yaml is its author's error, said in its place; the rest
    are still listed)."""
    devices = ["cpu"] + (["cuda"] if backends.cuda_available() else [])
    doc = {"schema": "gauntlet.list/1", "backends": {}, "problems": [], "broken": []}
    for b in discover.BACKENDS:
        doc["backends"][b] = {}
        for d in devices:
            ok, why = backends.status(b, d)
            doc["backends"][b][d] = {"ok": bool(ok), "why": why or ""}
    for pid, where in discover.locate_problems().items():
        try:
            problem = discover.get_problem(pid)
        except (ProblemError, UsageError, ValueError) as exc:
            doc["broken"].append({"id": pid, "folder": str(where.folder), "error": str(exc)})
            continue
        doc["problems"].append({
            "id": problem.id, "title": problem.title, "folder": str(where.folder), "shipped": bool(where.shipped),
            "shadows": bool(where.shadows), "dtypes": list(problem.dtypes), "baselines": dict(problem.baselines),
            "solutions": [{"name": s.name, "backend": s.backend, "dtypes": list(s.dtypes) if s.dtypes else None,
                           "path": str(s.path)} for s in discover.solutions_for(problem.id)]})
    return doc


def _print_listing(doc: dict) -> None:
    print("backends on this machine:")
    for b, by_device in doc["backends"].items():
        cells = [f"{d}: {'yes' if c['ok'] else 'no (' + c['why'] + ')'}" for d, c in by_device.items()]
        print(f"  {b:<7} " + "; ".join(cells))
    print()
    output.print_search_path(discover.search_path())
    for broken in doc["broken"]:
        print(f"{broken['id']}: cannot be loaded (the problem's error): {broken['error']}")
    for p in doc["problems"]:
        print(f"{p['id']}: {p['title']}")
        if not p["shipped"]:
            print(f"  folder:    {p['folder']}" + (f" (shadows the shipped {p['id']})" if p["shadows"] else ""))
        print(f"  dtypes:    {', '.join(p['dtypes'])}")
        print(f"  baselines: {', '.join(f'{k}={v}' for k, v in p['baselines'].items())}")
        for sol in p["solutions"]:
            dt = f"  dtypes {','.join(sol['dtypes'])}" if sol["dtypes"] else ""
            print(f"  - {sol['name']:<22} {sol['backend'] or '?':<7}{dt}")
