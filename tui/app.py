"""The on-call terminal UI: the picture, the walk, the evidence and the actions.

The app is given its knowledge (the graph), a feed and its settings; `create_app` is
the one factory the CLI and the tests call. Feed loads and diagnoses run in thread
workers and come back as typed messages (`tui.messages`); handlers store the result
and hand it to widgets, which only render. Input is never blocked: a slow Prometheus
delays the next picture, not the next key.

This module holds the layout, the workers, the message handlers and the keys; the app
mixes in its drawing (`tui.rendering`), the replay cursor (`tui.replay`), the
drill-down (`tui.drill`) and the fleet picker (`tui.fleets`), and opens the screens of
`tui.screens`.
"""

from __future__ import annotations

import gc
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, OptionList, Select, Static, TabbedContent, TabPane

from signals.timeparse import format_duration, format_instant
from signals.vocabulary import SIGNALS
from triage.core.escape import printable
from triage.core.graph import TriageGraph
from triage.core.model import AUTO, SYMPTOMS, Diagnosis
from triage.core.walk import diagnose, symptom_from_alert
from triage.rules import Slo
from tui.alerts import AlertView, load_alerts
from tui.drill import DrillDown
from tui.feeds import Feed, ReadingFeed, Snapshot
from tui.fleets import FleetChoice
from tui.messages import (
    AlertsLoaded,
    DiagnosisFailed,
    DiagnosisReady,
    FetchFailed,
    ReadProgressed,
    SnapshotLoaded,
)
from tui.rendering import Rendering
from tui.replay import ReplayCursor
from tui.screens import HelpScreen
from tui.settings import Settings
from tui.view import replica_rows, tile_specs
from tui.widgets import (
    SignalTile,
    StatusLine,
    WalkTree,
)

if TYPE_CHECKING:  # a replay loads no HTTP client
    from signals.prometheus import ReadProgress

__all__ = ["Settings", "TriageApp"]


class TriageApp(Rendering, ReplayCursor, DrillDown, FleetChoice, App[None]):
    """k9s for an LLM fleet: keyboard-first, dense, calm, never frozen."""

    CSS_PATH = "app.tcss"
    TITLE = "llm-triage"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 (an instance variable in App)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "keys"),
        Binding("1", "tab('diagnosis')", "diagnosis", show=False),
        Binding("2", "tab('overview')", "overview", show=False),
        Binding("3", "tab('alerts')", "alerts", show=False),
        Binding("s", "symptom", "symptom"),
        Binding("f", "fleets", "fleet"),
        Binding("enter", "drill", "chart", show=False),
        Binding("c", "copy", "copy", show=False),
        # The time cursor wins over the focused widget (tabs, tables) in replay; live, the
        # keys fall through to it (see check_action).
        Binding("left", "step(-1)", "◀", show=False, priority=True),
        Binding("right", "step(1)", "▶", show=False, priority=True),
        Binding("shift+left", "jump(-600)", "−10m", show=False, priority=True),
        Binding("shift+right", "jump(600)", "+10m", show=False, priority=True),
        Binding("o", "onset", "onset", show=False),
        Binding("space", "play", "play", show=False, priority=True),
        Binding("r", "refresh", "refresh", show=False),
    ]

    def __init__(self, graph: TriageGraph, feed: Feed, slo: Slo, settings: Settings | None = None) -> None:
        super().__init__()
        self.graph = graph
        self.feed = feed
        self.settings = settings or Settings()
        self.specs = tile_specs(slo)
        self.symptom = self.settings.symptom
        self.snapshot: Snapshot | None = None
        self.cursor: float | None = None
        self.diagnosis: Diagnosis | None = None
        self.fetch_error: str | None = None
        self.last_refresh: float | None = None
        self.reading: ReadProgress | None = None
        """How far the load under way has come (a live feed's), None when none is."""
        self.alerts: list[AlertView] = []
        self.playing = False
        self.pinned = False
        self._seq = 0
        self.shown_seq = 0
        self._overview_stale = False
        self.sort_by: tuple[str, bool] | None = None
        self.last_diagnosis_seconds: float | None = None

    # ----- layout -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        with TabbedContent(initial="diagnosis"):
            with TabPane("Diagnosis [1]", id="diagnosis"):
                with Horizontal(id="diagnosis-top"):
                    yield Select(
                        [(s.replace("_", " "), s) for s in (AUTO, *SYMPTOMS)],
                        value=self.symptom,
                        allow_blank=False,
                        compact=True,
                        id="symptom",
                    )
                    yield Static("", id="symptom-note")
                with Horizontal(id="diagnosis-body"):
                    with VerticalScroll(id="answer"):
                        yield Static("loading…", id="verdict")
                        yield Static(Text("FIRST ACTIONS  (c copies the confirm query)", style="bold"))
                        yield OptionList(id="actions")
                        yield Static("", id="warnings")
                    yield WalkTree("walk", id="walk")
            with TabPane("Overview [2]", id="overview"):
                with Grid(id="tiles"):
                    for spec in self.specs:
                        yield SignalTile(spec.signal, spec.label)
                yield DataTable(id="replicas", cursor_type="row", zebra_stripes=True)
            with TabPane("Alerts [3]", id="alerts"):
                yield Static(self._alerts_hint(), id="alerts-note")
                yield DataTable(id="alert-table", cursor_type="row")
        yield Footer()

    def _alerts_hint(self) -> str:
        if not (self.settings.alertmanager or self.settings.service):
            return "No alert source: start with --alertmanager URL and/or --service URL."
        return "loading alerts…"

    def on_mount(self) -> None:
        self.theme = self.settings.theme
        # Everything built so far (modules, playbooks, widgets) lives as long as the app:
        # keep it out of the collector's full passes, which otherwise pause keys for ~80 ms.
        gc.freeze()
        self.query_one("#alert-table", DataTable).add_columns("alert", "symptom", "started", "state", "cause")
        self._render_status()
        self.load_picture()
        if self.feed.live:
            self.set_interval(self.settings.refresh, self._refresh_live)
        if self.settings.alertmanager or self.settings.service:
            self.load_alerts_now()
            self.set_interval(self.settings.refresh, self.load_alerts_now)
        self.set_interval(self.settings.play_interval, self._tick)

    # ----- workers ------------------------------------------------------------------------

    # Every worker names itself: without a description Textual reprs the arguments, and the
    # repr of a frame prints every array (most of a second on a large fleet).
    @work(thread=True, exclusive=True, group="fetch", description="load the feed")
    def load_picture(self, at: float | None = None, purpose: str = "picture") -> None:
        """Load the feed (network for live) off the UI thread; the answer comes as a message."""
        feed = self.feed
        # A request's end is told from its own thread and may come after the load returned:
        # what is told once the load is over is dropped, so the load's answer comes last.
        telling, told = threading.Lock(), [True]

        def heard(progress: ReadProgress) -> None:
            with telling:
                if told[0]:
                    self.post_message(ReadProgressed(progress, feed))

        watched: AbstractContextManager[None] = (
            feed.reading(heard) if isinstance(feed, ReadingFeed) else nullcontext()
        )
        try:
            with watched:
                try:
                    snapshot = feed.load(at)
                finally:
                    with telling:
                        told[0] = False
        except Exception as exc:  # any feed failure is shown in place, never raised
            error = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
            self.post_message(FetchFailed(error, time.time(), feed))
            return
        self.post_message(SnapshotLoaded(snapshot, purpose, feed))

    @work(thread=True, exclusive=True, group="diagnose", description="diagnose")
    def run_diagnosis(self, seq: int, snapshot: Snapshot, symptom: str, at: float, source: str) -> None:
        started = time.perf_counter()
        try:
            diagnosis = diagnose(self.graph, snapshot.frame, symptom, at, source=source)
        except Exception as exc:  # a bug must show as a line on screen, not take the screen down
            self.post_message(DiagnosisFailed(seq, f"{type(exc).__name__}: {exc}"))
            return
        if snapshot.problems:
            diagnosis = replace(diagnosis, signal_problems=tuple(sorted(snapshot.problems.items())))
        self.post_message(DiagnosisReady(seq, diagnosis, time.perf_counter() - started))

    @work(thread=True, exclusive=True, group="alerts", description="load alerts")
    def load_alerts_now(self) -> None:
        """Read Alertmanager and the service off the UI thread."""
        try:
            alerts, errors = load_alerts(
                self.settings.alertmanager, self.settings.service, self.settings.service_token
            )
        except Exception as exc:  # an unexpected answer is an error line on the Alerts tab
            alerts, errors = [], [f"{type(exc).__name__}: {exc}"]
        self.post_message(AlertsLoaded(alerts, errors))

    def _refresh_live(self) -> None:
        if not self.pinned:
            self.load_picture()

    # ----- messages -----------------------------------------------------------------------

    def on_read_progressed(self, message: ReadProgressed) -> None:
        if message.source not in (None, self.feed):
            return
        self.reading = message.progress
        self._render_status()
        if self.snapshot is None and self.fetch_error is None:
            done = message.progress
            self.query_one("#verdict", Static).update(
                f"loading… {done.answered} of {done.asked} requests answered by Prometheus"
            )

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        if message.source not in (None, self.feed):
            return  # loaded for a fleet no longer chosen
        self.reading = None
        self.offer_fleets()
        if self.snapshot is None:
            gc.freeze()  # once: a replay's frame lives as long as the app (later garbage stays collectable)
        self.snapshot = message.snapshot
        self.fetch_error = None
        self.last_refresh = message.snapshot.fetched_at
        frame = message.snapshot.frame
        if self.feed.live and message.purpose == "picture":
            self.cursor = None
            self.pinned = False
        elif self.cursor is None or message.purpose == "alert":
            self.cursor = min(max(message.snapshot.at, frame.start), frame.end)
        self.request_diagnosis()

    def on_fetch_failed(self, message: FetchFailed) -> None:
        if message.source not in (None, self.feed):
            return
        self.reading = None
        self.offer_fleets()
        self.fetch_error = message.error
        self.last_refresh = message.at
        self._render_status()
        if self.snapshot is None:
            self.query_one("#verdict", Static).update(
                Text(
                    f"No signals yet: {printable(message.error)}\n"
                    f"Retrying every {format_duration(self.settings.refresh)}; r retries now.",
                    style="bold red",
                )
            )

    def on_diagnosis_ready(self, message: DiagnosisReady) -> None:
        if message.seq != self._seq:
            return
        self.diagnosis = message.diagnosis
        self.shown_seq = message.seq
        self.last_diagnosis_seconds = message.elapsed
        self._render_all()

    def on_diagnosis_failed(self, message: DiagnosisFailed) -> None:
        if message.seq != self._seq:
            return
        self.shown_seq = message.seq
        self.query_one("#verdict", Static).update(
            Text(f"The diagnosis failed: {printable(message.error)} (please report it)", style="bold red")
        )

    def on_alerts_loaded(self, message: AlertsLoaded) -> None:
        self.alerts = message.alerts
        table = self.query_one("#alert-table", DataTable)
        table.clear()
        for i, a in enumerate(message.alerts):
            started = format_instant(a.starts_at)[5:16].replace("T", " ") if a.starts_at else "?"
            cells = (a.alertname, a.symptom or "—", started, a.state, a.cause or "—")
            table.add_row(*(printable(c) for c in cells), key=str(i))
        note = f"{len(message.alerts)} firing · enter opens the diagnosis at the alert's start"
        if message.errors:
            note += " · " + printable(" · ".join(message.errors))
        self.query_one("#alerts-note", Static).update(Text(note, style="bold red" if message.errors else ""))

    # ----- state to screen ----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Waiting for a first picture, or a diagnosis is on its way (tests and benchmarks wait on this)."""
        if self.snapshot is None:
            return self.fetch_error is None
        return self.shown_seq != self._seq

    @property
    def moment(self) -> float | None:
        """The moment on screen: the cursor in replay, the newest sample live."""
        if self.snapshot is None:
            return None
        return self.cursor if self.cursor is not None else self.snapshot.frame.end

    def request_diagnosis(self) -> None:
        at = self.moment
        if self.snapshot is None or at is None:
            return
        self._seq += 1
        if self.symptom == AUTO:
            source = "auto"
        elif self.symptom == self.settings.symptom and self.settings.symptom_source:
            source = self.settings.symptom_source
        else:
            source = "given"
        self.run_diagnosis(self._seq, self.snapshot, self.symptom, at, source)
        self._render_status()

    @on(TabbedContent.TabActivated)
    def tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "overview" and self._overview_stale:
            self._render_overview()

    # ----- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Cursor keys belong to the replay; live, and under a dialog, they go to the widgets."""
        if action in ("step", "jump", "play"):
            return not self.feed.live and not isinstance(self.screen, ModalScreen)
        if action == "fleets":  # live only: a recording is one picture
            return self.feed.live and not isinstance(self.screen, ModalScreen)
        return True

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_symptom(self) -> None:
        self.action_tab("diagnosis")
        select = self.query_one("#symptom", Select)
        select.focus()
        select.action_show_overlay()

    @on(Select.Changed, "#symptom")
    def symptom_changed(self, event: Select.Changed) -> None:
        value = str(event.value)
        if value != self.symptom:
            self.symptom = value
            self.request_diagnosis()

    def action_refresh(self) -> None:
        self.load_picture()
        if self.settings.alertmanager or self.settings.service:
            self.load_alerts_now()

    def action_copy(self) -> None:
        if self.diagnosis is None:
            return
        actions = self.query_one("#actions", OptionList)
        index = actions.highlighted if actions.highlighted is not None else 0
        if index >= len(self.diagnosis.first_actions):
            self.notify("No action to copy.", timeout=3)
            return
        action = self.diagnosis.first_actions[index]
        self.copy_to_clipboard(action.confirm or action.text)
        self.notify(f"Copied: {action.confirm or action.text}", timeout=4)

    @on(SignalTile.Chosen)
    def tile_chosen(self, event: SignalTile.Chosen) -> None:
        self.action_drill(event.signal)

    @on(WalkTree.NodeSelected)
    def tree_selected(self, event: WalkTree.NodeSelected[str]) -> None:
        if event.node.data:
            self.action_drill(event.node.data)

    @on(DataTable.HeaderSelected, "#replicas")
    def header_selected(self, event: DataTable.HeaderSelected) -> None:
        """Sort by the clicked column, by value (worst first); a second click reverses."""
        key = str(event.column_key.value)
        previous = self.sort_by
        worst_first = key in SIGNALS and SIGNALS[key].higher_is_worse
        reverse = not previous[1] if previous and previous[0] == key else worst_first
        self.sort_by = (key, reverse)
        self._render_overview()

    @on(DataTable.RowSelected, "#replicas")
    def replica_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a replica charts the sorted column, else the row's first outlier, else TTFT."""
        if self.sort_by is not None and self.sort_by[0] != "replica":
            self.action_drill(self.sort_by[0])
            return
        replica = str(event.row_key.value)
        if self.snapshot is not None and self.diagnosis is not None:
            columns, rows = replica_rows(self.snapshot.frame, self.diagnosis.at)
            row = next((r for r in rows if r.replica == replica), None)
            if row is not None and row.outliers:
                self.action_drill(columns[min(row.outliers)][0])
                return
        self.action_drill("ttft_p99_seconds")

    @on(DataTable.RowSelected, "#alert-table")
    def alert_selected(self, event: DataTable.RowSelected) -> None:
        self.open_alert(event.cursor_row)

    def open_alert(self, row: int) -> None:
        if not 0 <= row < len(self.alerts):
            return
        alert = self.alerts[row]
        symptom = symptom_from_alert(alert.labels, self.graph.knowledge) or AUTO
        self.symptom = symptom
        self.settings = replace(self.settings, symptom=symptom, symptom_source="alert")
        self.query_one("#symptom", Select).value = symptom
        self.action_tab("diagnosis")
        if alert.starts_at is None:
            self.request_diagnosis()
        elif self.feed.live:
            self.pinned = True
            self.load_picture(alert.starts_at, "alert")
        else:
            self._move(alert.starts_at)
