"""Numbers and shapes as the report prints them, shared by the Markdown and the HTML so both say the same thing.

Every function takes whatever a results file holds (missing, null, NaN, a string where a number belongs) and
returns text; anything that is not a finite number prints as a dash, never as "nan" or a traceback.
"""
from __future__ import annotations

import math

DASH = "—"
DETAIL_LIMIT = 300


def number(value) -> float | None:
    """A finite float, or None for anything else (missing, null, NaN, strings, booleans)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def format_number(value, digits: int) -> str:
    value = number(value)
    return DASH if value is None else f"{value:.{digits}f}"


def format_speedup(value) -> str:
    value = number(value)
    return DASH if value is None else f"{value:.2f}×"


def format_speedup_ci(value, ci) -> str:
    text = format_speedup(value)
    interval = ci_bounds(ci)
    if text != DASH and interval:
        text += f" [{interval[0]:.2f}, {interval[1]:.2f}]"
    return text


def ci_bounds(ci) -> tuple[float, float] | None:
    """A 95% interval as two finite numbers, or None (absent, malformed, or a null bound)."""
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(number(c) is not None for c in ci):
        return number(ci[0]), number(ci[1])
    return None


def format_percent(value) -> str:
    value = number(value)
    return DASH if value is None else f"{100 * value:.0f}%"


def format_ms(value) -> str:
    """Milliseconds with about four significant digits, without switching to scientific notation."""
    value = number(value)
    if value is None:
        return DASH
    return f"{value:.1f}" if value >= 100 else f"{value:.3f}" if value >= 1 else f"{value:.4f}"


def format_seconds(value) -> str:
    value = number(value)
    return DASH if value is None else f"{value:.1f} s"


def format_shape(shape) -> str:
    """Dims named, in the problem's order: {"M": 4096, "N": 4096, "K": 4096} -> "M=4096 N=4096 K=4096".

    Records carry shapes as objects keyed by the problem's dim names (harness/schemas/eval.schema.json); a bare
    list (no names to show) is joined with "x".
    """
    if isinstance(shape, dict):
        return " ".join(f"{k}={v}" for k, v in shape.items()) or DASH
    if isinstance(shape, (list, tuple)):
        return "x".join(str(v) for v in shape) or DASH
    return DASH if shape is None else str(shape)


def truncate(text, limit: int = DETAIL_LIMIT) -> str:
    """Cap a candidate-controlled detail: a hostile or chatty candidate must not flood the report."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"
