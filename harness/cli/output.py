"""What commands print: the one JSON object of --json, progress lines, a record in words."""
from __future__ import annotations

import json
import sys
import time

from harness.judge.records import interrupt


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
    from harness.judge.records.results import environment
    return environment(device)


def progress(i: int, n: int, key: str, what: str, clock: dict | None = None) -> None:
    """One line on stderr per step of a long command. With `clock` ({"t0": monotonic start, "done": how many
    finished, set by the caller}), a finished step also says the rate and about how long is left, from the steps
    judged so far (resumed ones cost nothing and are not counted)."""
    width = 24
    filled = int(width * i / n)
    tail = ""
    if clock and clock.get("done"):
        elapsed = time.monotonic() - clock["t0"]
        per = elapsed / clock["done"]
        left = per * (n - i)
        tail = f"  [{3600 / per:.0f}/h, about {duration(left)} left]" if per > 0 and i < n else \
            f"  [{3600 / per:.0f}/h]" if per > 0 else ""
    print(f"[{'#' * filled}{'.' * (width - filled)}] {i}/{n} {key}: {what}{tail}", file=sys.stderr, flush=True)


def duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def print_search_path(sp) -> None:
    """Where problems and solutions were looked for, and why (harness.searchpath has the rules)."""
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
        from harness import formats
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
            print(f"    replay: {r['repro']}")
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
