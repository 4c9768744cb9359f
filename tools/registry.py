"""The registry of bundled incidents: each module of `tools/incidents_*.py` adds to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "fixtures"
INCIDENTS: dict[str, Callable[[], None]] = {}


def incident(fn: Callable[[], None]) -> Callable[[], None]:
    """Register an incident writer under its function name."""
    INCIDENTS[fn.__name__.replace("_", "-")] = fn
    return fn


def path(name: str) -> str:
    """Where a fixture of this name is written."""
    return str(OUT / f"{name}.yaml")
