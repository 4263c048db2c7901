"""What every executor promises, checked from the records alone: no two candidates timed on one card at once.

Each timing entry says which card timed it and when the judge held that card alone (`alone`: {"card", "from", "until"},
wall-clock seconds; gauntlet.judge.timing.timed). Slots on different GPUs never share a card; judges sharing one
(`--overlap K`, `pytest -n 8`) take turns (gauntlet.judge.timing.turns). This reads the proof back from what was
written: any two spans of different records on the same card that intersect. Times come from each judge's own clock, so
the check is exact on one host (one clock) and only as good as the hosts' clock agreement across a cluster, where a card
belongs to one host anyway.
"""
from __future__ import annotations


def spans(records) -> list[tuple[str, float, float, str, str]]:
    """(card, from, until, record, what) for every timed entry of `records` (eval records, eval-many lines, a results
    file's records) that carries its span."""
    out = []
    for i, rec in enumerate(records):
        who = str(rec.get("id") or f"{rec.get('problem')}/{rec.get('solution')}#{rec.get('index', i)}")
        for entry in rec.get("timings") or []:
            held = entry.get("alone")
            if isinstance(held, dict) and held.get("card") and all(isinstance(held.get(k), (int, float))
                                                                   for k in ("from", "until")):
                shape = ",".join(f"{k}={v}" for k, v in (entry.get("shape") or {}).items())
                out.append((held["card"], float(held["from"]), float(held["until"]), who,
                            f"{who} {entry.get('dtype')} {shape}"))
    return out


def timed_together(records) -> list[dict]:
    """Every pair of timed spans of different records that overlapped on one card (empty: the promise held)."""
    found = []
    by_card: dict[str, list] = {}
    for span in spans(records):
        by_card.setdefault(span[0], []).append(span)
    for card, held in by_card.items():
        held.sort(key=lambda s: s[1])
        open_spans: list = []              # spans not yet ended by the current one's start
        for span in held:
            open_spans = [o for o in open_spans if o[2] > span[1]]
            for other in open_spans:
                if other[3] != span[3]:
                    found.append({"card": card, "first": other[4], "second": span[4],
                                  "overlap_s": round(min(other[2], span[2]) - span[1], 3)})
            open_spans.append(span)
    return found
