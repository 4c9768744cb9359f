"""How the checks write numbers and lists in evidence, and read configuration labels.

Evidence is read by people in a terminal or a ticket, so counts are rounded the way
people say them and long lists are cut; label values arrive as text in whatever form
an engine chose ("True", "1", "0.9").
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def num(value: float) -> str:
    """A count or size as people read it: 1,850 or 947k."""
    if not math.isfinite(value):
        return "?"
    if abs(value) >= 100_000:
        return f"{value / 1000:,.0f}k"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.3g}"


def ratio_text(value: float) -> str:
    return f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"


def listed(names: Iterable[str], limit: int = 6) -> str:
    items = sorted(set(names))
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def as_float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def as_bool(text: str | None) -> bool | None:
    if text is None:
        return None
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off", "none"):
        return False
    return None
