"""What commands print: the one JSON object of --json, progress lines, a record in words."""
from __future__ import annotations

import json
import sys
import time

from ..judge.records import interrupt


JSON_SAID = [False]     # --json: whether the one object has been printed (never a second, never half of one)


def emit_json(doc: dict) -> None:
    with interrupt.held():
        if not JSON_SAID[0]:
            sys.stdout.write(json.dumps(doc, default=str) + "\n")
            sys.stdout.flush()
            JSON_SAID[0] = True


def interrupted_doc(detail: str) -> dict:
    return {"schema": "gauntlet.eval/1", "verdict": "interrupted",
            "reasons": [{"code": "interrupted", "detail": detail, "repro": ""}]}


def env(device: str) -> dict:
    from ..judge.records.results import environment
    return environment(device)


def progress(i: int, n: int, key: str, what: str, clock: dict | None = None) -> None:
    """One line on stderr per step of a long command. With `clock` ({"t0": monotonic start, "done": how many
    finished, set by the caller}), a finished step also says the rate and about how long is left, from the steps
    judged so far (resumed ones cost nothing and are not counted). Where the caller also keeps "walls" (the wall
    time of each step judged so far) and "running" ({key: monotonic start} of the steps in flight), the time left
    counts what those in flight still have to run (time_left)."""
    width = 24
    filled = int(width * i / n)
    tail = ""
    if clock and clock.get("done"):
        now = time.monotonic()
        per = (now - clock["t0"]) / clock["done"]
        left = per * (n - i)
        if clock.get("walls"):
            running = [now - t for t in clock.get("running", {}).values()]
            left = time_left(clock["walls"], running, max(0, n - i - len(running)), clock.get("slots", 1))
        tail = f"  [{3600 / per:.0f}/h, about {duration(left)} left]" if per > 0 and i < n else \
            f"  [{3600 / per:.0f}/h]" if per > 0 else ""
    print(f"[{'#' * filled}{'.' * (width - filled)}] {i}/{n} {key}: {what}{tail}", file=sys.stderr, flush=True)


def time_left(walls: list[float], running: list[float], waiting: int, slots: int) -> float:
    """Seconds until the last of the steps still to judge is done: `walls` the finished steps' wall times, `running`
    how long each step in flight has run, `waiting` the steps not started, `slots` how many run at once.

    A step in flight that has run e seconds still has, on average, the finished steps longer than e less e (their
    mean residual life); one that has outlived every finished step is guessed to need half as long again. A step not
    started takes the mean. The work left spread over the slots, but never less than the longest step in flight still
    needs, nor, while steps wait, than a mean step from the first free slot. The rate alone (steps done over time
    spent) knows nothing of the steps in flight: early in a run of several slots it counts none of their progress,
    and late it counts a long judgement in flight as an average one. Replayed on suite runs' timelines, this estimate
    is off by less than half as much as the rate's over a run (docs/benchmarks.md, "Figures moved from docstrings")."""
    mean = sum(walls) / len(walls)
    still = []
    for e in running:
        longer = [w for w in walls if w > e]
        still.append(sum(longer) / len(longer) - e if longer else e / 2)
    floor = max(still, default=0.0)
    if waiting:
        floor = max(floor, (min(still) if len(still) >= slots else 0.0) + mean)
    return max((sum(still) + waiting * mean) / max(1, slots), floor)


def duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def print_search_path(sp) -> None:
    """Where problems and solutions were looked for, and why (gauntlet.searchpath has the rules)."""
    origins = dict(sp.origins)
    for key in ("problems", "solutions"):
        mine = [str(p) for p in getattr(sp, key)]
        mine = [", ".join(mine) + f" ({origins[key]})"] if mine else []
        print(f"{key} from: " + ("; ".join(mine + (["shipped"] if sp.shipped else [])) or "nowhere"))
    print()


def print_record(record) -> None:
    print(f"{record.problem} / {record.solution} [{record.backend or 'no BACKEND'}] on {record.device}: "
          f"{record.verdict.upper()}")
    if record.adapter:
        from .. import formats
        print(f"  judged as {formats.LABELS.get(record.format, record.format)}: {record.adapter.get('mapping')}")
        if record.adapter.get("backend_from"):
            print(f"  backend {record.adapter.get('backend') or 'none'} ({record.adapter['backend_from']})")
    for name, c in record.cases.items():
        print(f"  {name:<9} {c['examples']} examples, {c['calls']} calls: {c['status']}")
        for kernel in (k for k in c.get("kernels", []) if "[autotune:" in k):   # which config the CPU ran
            print(f"  {'':<9} ran {kernel}")
    for name, why in record.skipped.items():
        print(f"  {name:<9} skipped: {why}")
    for r in record.reasons:
        print(f"  [{r['code']}] {r['detail']}")
        if r.get("repro"):
            print(f"    replay: {runnable(r['repro'])}")
    for t in record.timings:
        shape = "x".join(str(v) for v in t["shape"].values())
        base = "  ".join(f"{k} {b['speedup']:.2f}x [{b['ci95'][0]:.2f},{b['ci95'][1]:.2f}]"
                         for k, b in t["baselines"].items())
        print(f"  {t['dtype']:<9} {shape:<18} {t['candidate_ms']:.4f} ms  {t['tflops']:.1f} TFLOP/s  {base}")
    conf = (record.confinement or {}).get("candidate") or {}
    if conf:
        state = "verified" if conf.get("verified") else "NOT verified"
        print(f"  sandbox {conf.get('mode')}: Landlock ABI {conf.get('landlock_abi') or 'none'}, "
              f"seccomp {'on' if conf.get('seccomp') else 'off'}, capabilities {conf.get('capabilities')} ({state})")
    print(f"  seed {record.seed}, {record.elapsed_s:.1f}s")


DETAIL_CHARS = 240      # a failure's first reason on a run's progress: two lines of a terminal; the record has it all


def runnable(command: str) -> str:
    """A `gauntlet ...` command from a record (which keeps it in that form, the same on every machine), started the
    way this process was, so that it runs as printed (gauntlet.judge.records.stopped.invoked_as)."""
    import shlex
    from ..judge.records import stopped
    if not command.startswith("gauntlet "):
        return command
    return shlex.join(stopped.invoked_as()) + command[len("gauntlet"):]


def failure_lines(record) -> list[str]:
    """What a run says under a judgement that did not pass: the first line of the first reason's detail, cut to
    DETAIL_CHARS (a traceback's later lines would break the progress's indentation mid-frame; `eval` and the record
    show it all), and the command that replays it (the reason's own, a failing case's; else the whole judgement
    again, with its seed)."""
    if record.verdict in ("pass", "unsupported") or not record.reasons:
        return []
    first = record.reasons[0]
    lines = first["detail"].strip().splitlines() or [""]
    detail = lines[0] if len(lines[0]) <= DETAIL_CHARS else lines[0][:DETAIL_CHARS - 3] + "..."
    detail += " (...)" if len(lines) > 1 else ""
    more = f" (and {len(record.reasons) - 1} more reason(s) in the results file)" if len(record.reasons) > 1 else ""
    repro = next((r["repro"] for r in record.reasons if r.get("repro")), "")
    if not repro:
        import shlex
        repro = shlex.join(["gauntlet", "eval", record.problem, record.path, "--device", record.device]
                           + (["--seed", str(record.seed)] if record.seed is not None else []))
    return [f"    [{first['code']}] {detail}{more}", f"    replay: {runnable(repro)}"]

