"""`gauntlet eval`: one candidate file (or shipped solution name) judged on one problem."""
from __future__ import annotations

from .. import discover
from . import options, output
from ..judge.records import interrupt, stopped


def add(sub) -> None:
    ev = sub.add_parser("eval", help="judge one candidate file (or shipped solution name) on one problem")
    ev.add_argument("problem")
    ev.add_argument("file", help="a solution file path, or the name of a shipped solution")
    options.common_options(ev)
    options.search_options(ev)
    options.formats_option(ev)
    ev.add_argument("--case", help="replay one case, as printed in a failure's repro line")
    ev.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    ev.set_defaults(func=run, prestart=prestart)


def prestart(args) -> None:
    """Before this process imports the judge's code and torch (gauntlet.cli.main): the judgement's workers, gated
    (gauntlet.judge.process.standby.prestart_judgement), so that their start-up and the CLI's own overlap. The device
    is guessed without torch (an NVIDIA driver's device node, and CUDA_VISIBLE_DEVICES not emptied): a wrong guess
    only costs a worker that is never taken. Anything wrong with the arguments is left for `run` to say."""
    import os
    from types import SimpleNamespace
    device = args.device or ("cuda" if os.path.exists("/dev/nvidiactl")
                             and os.environ.get("CUDA_VISIBLE_DEVICES", "0") not in ("", "-1") else "cpu")
    try:
        problem = discover.get_problem(args.problem)
        solution = discover.get_solution(problem.id, args.file, fmt=args.format, backend=args.backend)
    except Exception:  # noqa: BLE001 - said by `run`, with its blame
        return
    from ..judge.process import standby
    standby.prestart_judgement(problem, solution, SimpleNamespace(device=device, sandbox=args.sandbox),
                               baseline=not (args.no_timing or args.case))


def run(args) -> int:
    from ..judge.evaluate import evaluate
    device = options.device(args)
    problem = discover.get_problem(args.problem)
    solution = discover.get_solution(problem.id, args.file, fmt=args.format, backend=args.backend)
    options.check_format(problem, solution, args.backend)
    opts = options.judge_options(args, device)
    options.check_dtypes(opts.dtypes, [problem])
    if opts.case:
        from ..judge.values import fuzz
        widest = max(problem.dtypes[d].torch_dtype().itemsize for d in (opts.dtypes or problem.dtypes))
        fuzz.check_case(opts.case, problem, device, widest)      # a usage error, before any process starts
    if device == "cuda" and opts.timing and not opts.case:
        opts.peaks = options.peaks(problem, opts.dtypes)
    status = None
    try:
        record = options.evaluate_or_record(evaluate, problem, solution, opts)
    except interrupt.Interrupted as stop:
        record = stopped.eval_record(problem.id, solution.name, str(solution.path), solution.backend, device,
                                     stop.name)
        status = stop.status
    if args.json:
        output.emit_json(dict(record.to_json(), environment=output.env(device), peaks=opts.peaks))
    else:
        output.print_record(record)
    return status or (0 if record.verdict == "pass" else 1)
