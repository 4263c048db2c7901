"""The published JSON Schemas of Gauntlet's outputs (harness/schemas/, shipped in the wheel) and a validator.

- `eval`: one judgement (`gauntlet eval --json`; also a results file's records and eval-many's lines);
- `run`: a results file (`gauntlet run --out`);
- `many`: one line of `gauntlet eval-many`;
- `compare`: `gauntlet compare --json`.

Plain JSON Schema (draft 2020-12): any language's validator reads them. Here, `jsonschema` (the reference
implementation for Python; in the `test` extra) checks them against real output in tests/test_schemas.py.
"""
from __future__ import annotations

import json
from importlib import resources

KINDS = ("eval", "run", "many", "compare")


def load(kind: str) -> dict:
    if kind not in KINDS:
        raise ValueError(f"unknown schema {kind!r}; known: {', '.join(KINDS)}")
    return json.loads(resources.files("gauntlet").joinpath("schemas", f"{kind}.schema.json").read_text())


def problems(doc, kind: str) -> list[str]:
    """Every way `doc` breaks the schema, as 'path: message' lines (empty: valid)."""
    import jsonschema
    from jsonschema.exceptions import best_match
    validator = jsonschema.Draft202012Validator(load(kind))
    out = []
    for error in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        if error.context:                 # anyOf: say what the closest alternative lacked, not the whole document
            error = best_match(error.context)
        out.append(f"{'/'.join(str(p) for p in error.absolute_path) or '(top)'}: {error.message[:300]}")
    return out
