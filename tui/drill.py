"""Opening the drill-down: which signal the focus points at, and its chart with the PromQL.

Enter (or a click on a tile or a walk node) charts one signal over the window, per
replica. Working out the signal and building the `SignalScreen` for it is kept apart
from the app's layout, workers and rendering, which it reaches through `DrillHost`.
"""

from __future__ import annotations

from typing import Protocol

from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, OptionList, Select

from signals.timeparse import format_instant
from triage.core.escape import printable
from triage.core.model import Diagnosis
from tui.feeds import Snapshot
from tui.screens import SignalScreen
from tui.view import TileSpec, chart_data
from tui.widgets import Chart, SignalTile, WalkTree, replica_lines


class DrillHost(Protocol):
    """What the drill-down needs of the app it opens on."""

    snapshot: Snapshot | None
    diagnosis: Diagnosis | None
    specs: tuple[TileSpec, ...]

    @property
    def focused(self) -> Widget | None: ...

    def notify(self, message: str, *, timeout: float | None = None) -> None: ...

    def push_screen(self, screen: Screen[None]) -> object: ...

    def open_alert(self, row: int) -> None: ...

    def _selected_signal(self) -> str | None: ...


class DrillDown:
    """The `enter` key's action, mixed into the app."""

    def _selected_signal(self: DrillHost) -> str | None:
        focused = self.focused
        if isinstance(focused, WalkTree):
            return focused.signal_at_cursor()
        if isinstance(focused, SignalTile):
            return focused.chart_signal
        if self.diagnosis is not None and self.diagnosis.top and self.diagnosis.top.evidence:
            return self.diagnosis.top.evidence[0].signal
        return None

    def action_drill(self: DrillHost, signal: str | None = None) -> None:
        focused = self.focused
        if signal is None and isinstance(focused, DataTable) and focused.id == "alert-table":
            self.open_alert(focused.cursor_row)
            return
        if signal is None and isinstance(focused, (OptionList, Select)):
            return
        signal = signal or self._selected_signal()
        if signal is None or self.snapshot is None or self.diagnosis is None:
            self.notify("Select a signal or an evidence line first.", timeout=3)
            return
        d = self.diagnosis
        data = chart_data(self.snapshot.frame, signal, d.at, d.baseline_window, d.onset)
        red = next((s.red_line for s in self.specs if s.signal == signal), None)
        base = f" · baseline {data.baseline:.4g}" if data.baseline is not None else ""
        title = f"{signal} · up to {format_instant(d.at)}{base} · {len(data.replicas)} replicas"
        query = self.snapshot.queries.get(signal, "(no catalog query for this signal)")
        screen = SignalScreen(title, Chart(data, red, id="chart"), replica_lines(data, 100), printable(query))
        self.push_screen(screen)
