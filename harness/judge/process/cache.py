"""The judge's cache folder (`GAUNTLET_CACHE`, else `$XDG_CACHE_HOME/gauntlet`, else `~/.cache/gauntlet`), outside
every worker's scratch folder, so no confined worker can write it; and its small JSON documents (the card's ceilings,
the interpreter check's stamps), read whole and replaced atomically. Nothing in it is needed for a verdict to be
right: a document that cannot be read is empty, one that cannot be written is measured again next time."""
from __future__ import annotations

import json
import os
from pathlib import Path


def cache_root() -> Path:
    explicit = os.environ.get("GAUNTLET_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gauntlet"


def read_json(name: str) -> dict:
    """The document `name` in the cache folder, or {} where there is none (or it is not a JSON object)."""
    try:
        doc = json.loads((cache_root() / name).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def write_json(name: str, doc: dict) -> None:
    """Replace the document `name` at once (a temporary file renamed over it); silently nothing where the folder
    cannot be written."""
    path = cache_root() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.stem}-{os.getpid()}{path.suffix}")
        tmp.write_text(json.dumps(doc, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass
