"""The app's modal screens: every key (help) and one signal drilled down with its PromQL.

Each screen only shows what it is given; the app decides when to open one and with
what, so the screens live apart from the app's state and workers.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.widgets import Chart

KEYS: tuple[tuple[str, str], ...] = (
    ("?", "show every key"),
    ("q", "quit"),
    ("1 / 2 / 3", "Diagnosis / Overview / Alerts tab"),
    ("s", "choose the symptom (six symptoms and auto)"),
    ("enter", "drill down: chart the selected signal or evidence line, with its PromQL"),
    ("c", "copy the highlighted action's confirm query (or the drill-down's PromQL)"),
    ("← / →", "replay: one step back / forward"),
    ("shift+← / shift+→", "replay: ten minutes back / forward"),
    ("o", "replay: jump to the onset"),
    ("space", "replay: play / pause"),
    ("r", "live: refresh now (alerts too)"),
    ("f", "live: choose the fleet (or all of them) to show"),
    ("escape", "close the drill-down or this help"),
)


class HelpScreen(ModalScreen[None]):
    """Every key, in one table."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        text = Text("Keys\n\n", style="bold")
        for key, meaning in KEYS:
            text.append(f"{key:>18}  ", style="bold cyan")
            text.append(f"{meaning}\n")
        text.append(
            "\nThe mouse works too: click a tab, a tree node, a column header to sort.", style="italic"
        )
        yield VerticalScroll(Static(text), id="help")


class SignalScreen(ModalScreen[None]):
    """One signal charted over the window, per replica, with the PromQL behind it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "close"),
        Binding("c", "copy", "copy PromQL"),
    ]

    def __init__(self, title: str, chart: Chart, replicas: Text, query: str) -> None:
        super().__init__()
        self.title_text = title
        self.chart = chart
        self.replicas = replicas
        self.promql = query

    def compose(self) -> ComposeResult:
        with Vertical(id="drill"):
            yield Static(Text(self.title_text, style="bold"), id="drill-title")
            yield self.chart
            yield Static(Text.assemble(("PromQL  ", "bold"), (self.promql, "cyan")), id="drill-query")
            with VerticalScroll(id="drill-replicas"):
                yield Static(self.replicas)

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.promql)
        self.notify("PromQL copied")
