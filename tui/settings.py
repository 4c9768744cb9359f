"""How the app runs, as the CLI and the tests set it, kept free of Textual.

The settings are plain data: `triage tui` reads them from its flags before the screen
takes over (and before Textual is imported), and the tests build them directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from triage.core.model import AUTO


@dataclass
class Settings:
    """How the app runs: the symptom to start from, refresh period, alert sources."""

    symptom: str = AUTO
    symptom_source: str = ""
    refresh: float = 15.0
    play_interval: float = 0.5
    alertmanager: str | None = None
    service: str | None = None
    service_token: str | None = None
    theme: str = "textual-dark"
    clock: Callable[[], float] = field(default=time.time)
