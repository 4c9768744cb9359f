"""Drawing the app's state: the status line, the diagnosis tab, and the overview tab.

The handlers store what workers bring back and call these; they only read the app's
state and update widgets, so they live apart from the layout, the workers and the keys,
reaching the app through `RenderHost`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar, overload

from rich.text import Text
from textual.css.query import DOMQuery
from textual.widget import Widget
from textual.widgets import DataTable, OptionList, Static, TabbedContent
from textual.widgets.option_list import Option

from signals.fleets import FleetMap
from signals.timeparse import format_duration, format_instant
from triage.core.escape import printable
from triage.core.model import AUTO, Diagnosis
from tui.feeds import Feed, Snapshot
from tui.fleets import fleet_status
from tui.view import TileSpec, format_value, replica_rows, tiles
from tui.widgets import SignalTile, StatusLine, WalkTree, action_text, fmt_age, verdict_text, warnings_text

if TYPE_CHECKING:  # a replay loads no HTTP client
    from signals.prometheus import ReadProgress

W = TypeVar("W", bound=Widget)


class _Settings(Protocol):
    """The two settings drawing reads."""

    @property
    def refresh(self) -> float: ...

    def clock(self) -> float: ...


class RenderHost(Protocol):
    """What drawing needs of the app: its state, and its widgets by id."""

    feed: Feed
    snapshot: Snapshot | None
    diagnosis: Diagnosis | None
    fetch_error: str | None
    last_refresh: float | None
    reading: ReadProgress | None
    playing: bool
    pinned: bool
    symptom: str
    specs: tuple[TileSpec, ...]
    sort_by: tuple[str, bool] | None
    _overview_stale: bool
    fleet_map: FleetMap | None

    @property
    def settings(self) -> _Settings: ...

    @property
    def moment(self) -> float | None: ...

    @overload
    def query_one(self, selector: type[W]) -> W: ...

    @overload
    def query_one(self, selector: str, expect_type: type[W]) -> W: ...

    def query(self, selector: str) -> DOMQuery[Widget]: ...

    def _render_status(self) -> None: ...

    def _render_overview(self) -> None: ...


class Rendering:
    """The app's drawing, mixed into it."""

    def _render_status(self: RenderHost) -> None:
        text = Text()
        text.append("LIVE " if self.feed.live else "REPLAY ", style="bold reverse")
        text.append(f" {printable(self.feed.label)}")
        text.append_text(fleet_status(self.feed, self.snapshot, self.fleet_map))
        at = self.moment
        if at is not None:
            text.append(f" · {format_instant(at)[5:19].replace('T', ' ')}Z")
            d = self.diagnosis
            if d is not None and d.onset is not None:
                delta = at - d.onset
                sign = "+" if delta >= 0 else "−"
                text.append(f" · onset {sign}{format_duration(abs(delta))}")
        if not self.feed.live:
            text.append(" · ▶ playing" if self.playing else " · ←/→ step, space play")
        elif self.pinned:
            text.append(" · at an alert's start; r returns to now")
        elif self.last_refresh is not None:
            text.append(f" · refreshed {fmt_age(max(0.0, self.settings.clock() - self.last_refresh))}")
            text.append(f" every {format_duration(self.settings.refresh)}")
        if self.feed.live and self.reading is not None:
            text.append(f" · reading {self.reading.answered} of {self.reading.asked}", style="dim")
        if self.fetch_error:
            text.append(f" · FETCH FAILED: {printable(self.fetch_error)}", style="bold red")
            if self.snapshot is not None:
                text.append(" (showing the last good data)", style="red")
        # A live app's clock ticks once a second and may fire once more while the app is
        # closing, after its screen is gone: then there is no status line left to update.
        for line in self.query("#status").results(StatusLine):
            line.update(text)

    def _render_all(self: RenderHost) -> None:
        d = self.diagnosis
        snapshot = self.snapshot
        if d is None or snapshot is None:
            return
        self._render_status()
        note = f"symptom: {d.symptom} ({d.symptom_source})" if self.symptom == AUTO else ""
        self.query_one("#symptom-note", Static).update(note)
        self.query_one("#walk", WalkTree).show(d)
        self.query_one("#verdict", Static).update(verdict_text(d))
        actions = self.query_one("#actions", OptionList)
        actions.clear_options()
        if d.first_actions:
            actions.add_options(
                [
                    Option(action_text(i, a.text, a.confirm), id=a.id)
                    for i, a in enumerate(d.first_actions, start=1)
                ]
            )
        else:
            actions.add_option(Option(Text("none: nothing to act on", style="italic"), disabled=True))
        self.query_one("#warnings", Static).update(warnings_text(d))
        self._overview_stale = True
        if self.query_one(TabbedContent).active == "overview":
            self._render_overview()

    def _render_overview(self: RenderHost) -> None:
        """Tiles and the replica table, drawn only while visible: 64 rows cost more than the walk."""
        d, snapshot = self.diagnosis, self.snapshot
        if d is None or snapshot is None:
            return
        self._overview_stale = False
        for tile in tiles(snapshot.frame, d.at, d.baseline_window, self.specs):
            self.query_one(f"#tile-{tile.signal}", SignalTile).show(tile)
        table = self.query_one("#replicas", DataTable)
        columns, rows = replica_rows(snapshot.frame, d.at)
        table.clear(columns=True)
        table.add_column("replica", key="replica")
        for signal, label in columns:
            table.add_column(label, key=signal)
        rows.sort(key=lambda r: (not r.flagged, r.replica))
        keys = [c[0] for c in columns]
        if self.sort_by is not None and self.sort_by[0] in keys:
            index, reverse = keys.index(self.sort_by[0]), self.sort_by[1]
            present = [r for r in rows if r.values[index] is not None]
            present.sort(key=lambda r: r.values[index] or 0.0, reverse=reverse)
            rows = present + [r for r in rows if r.values[index] is None]  # unknown last, either way
        elif self.sort_by is not None and self.sort_by[0] == "replica":
            rows.sort(key=lambda r: r.replica, reverse=self.sort_by[1])
        for row in rows:
            cells: list[Text] = []
            name = Text(printable(row.replica), style="bold red" if row.flagged else "")
            if row.vanished:
                name.append(" gone", style="bold red")
            if row.gpu_fault:
                name.append(" gpu", style="bold red")
            cells.append(name)
            for ci, value in enumerate(row.values):
                signal = columns[ci][0]
                style = "bold red reverse" if ci in row.outliers else ""
                cells.append(Text(format_value(value, signal, compact=True), style=style, justify="right"))
            table.add_row(*cells, key=row.replica)
