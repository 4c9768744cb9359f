"""Choosing the fleet: the fleets a live Prometheus holds, and the picker that scopes the feed.

One Prometheus holds many fleets, and a picture of all of them together lets one fleet's
trouble pass for another's cause. Live, after the first load (so it never competes with
it), a thread worker lists the fleets; when there are several and none was chosen the
picker opens once by itself, and `f` opens it at any time. Choosing a fleet replaces the
feed with one scoped to it and reloads: the overview and the replica table then show
that fleet alone and the status line names it. Keys never wait on the listing: the
picker shows what is known and fills in when the worker answers.

The picker and the app's part of it live here, apart from the layout, the workers and
the keys of `tui.app`, which this reaches through `FleetHost`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker

from signals.fleets import Fleet, FleetMap
from triage.core.escape import printable
from tui.feeds import Feed, FleetFeed, Snapshot
from tui.messages import FleetsFailed, FleetsFound

ALL = "*"
"""The picker's choice of no fleet: the whole server, as without `--fleet` (no fleet name is `*`)."""


def fleet_line(fleet: Fleet, current: bool) -> Text:
    """One fleet in the picker: its name, then what it runs on and what could not be joined."""
    text = Text(("● " if current else "  ") + printable(fleet.name), style="bold" if current else "")
    workload = str(fleet.workload) if fleet.workload is not None else "workload unknown"
    gpus = f"{len(fleet.gpus)} GPUs" if fleet.gpus else "no GPUs joined"
    details = f"\n    {fleet.engine} · {printable(workload)} · {len(fleet.replicas)} replicas · {gpus}"
    if fleet.problems:
        details += f" · {len(fleet.problems)} join problem{'s' if len(fleet.problems) > 1 else ''}"
    text.append(details, style="dim")
    return text


class FleetScreen(ModalScreen[str | None]):
    """The fleets of the server, one option each, and the whole server; enter scopes to one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,f", "dismiss", "close")]

    def __init__(self, fleets: FleetMap | None, current: str | None, error: str | None = None) -> None:
        super().__init__()
        self.fleets = fleets
        self.current = current
        self.error = error

    def compose(self) -> ComposeResult:
        with Vertical(id="fleet-picker"):
            yield Static(Text("Fleets  (enter scopes the picture to one; escape keeps it)", style="bold"))
            yield OptionList(id="fleet-list")
            yield Static("", id="fleet-note")

    def on_mount(self) -> None:
        self.show(self.fleets, self.error)
        self.query_one("#fleet-list", OptionList).focus()

    def show(self, fleets: FleetMap | None, error: str | None = None) -> None:
        """List `fleets` (None: still looking), or say why they could not be listed; a fresher
        list keeps the line the user had moved to."""
        self.fleets, self.error = fleets, error
        options = self.query_one("#fleet-list", OptionList)
        before = options.highlighted_option.id if options.highlighted_option is not None else None
        options.clear_options()
        note = self.query_one("#fleet-note", Static)
        if fleets is None:
            note.update(Text(printable(error), style="bold red") if error else Text("looking for fleets…"))
            return
        found = list(fleets.fleets)
        options.add_option(Option(Text(("● " if self.current is None else "  ") + "all fleets"), id=ALL))
        chosen = 0
        for i, fleet in enumerate(found, start=1):
            current = self.current is not None and fleet.name == self.current
            chosen = i if current else chosen
            options.add_option(Option(fleet_line(fleet, current), id=fleet.name))
        ids = [ALL, *(f.name for f in found)]
        options.highlighted = ids.index(before) if before in ids else chosen or (1 if found else 0)
        count = f"{len(found)} fleet{'s' if len(found) != 1 else ''} found"
        if fleets.problems:
            count += f" · {len(fleets.problems)} join problems (triage fleets explains them)"
        text = Text(count, style="dim")
        if error:
            text.append(f" · {printable(error)}", style="red")
        note.update(text)

    @on(OptionList.OptionSelected, "#fleet-list")
    def chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class FleetHost(Protocol):
    """What choosing a fleet needs of the app."""

    feed: Feed
    snapshot: Snapshot | None
    pinned: bool
    fleet_map: FleetMap | None
    fleet_error: str | None
    fleets_offered: bool
    listing_fleets: bool

    @property
    def screen(self) -> Screen[object]: ...

    def push_screen(self, screen: FleetScreen, callback: Callable[[str | None], None]) -> object: ...

    def post_message(self, message: FleetsFound | FleetsFailed) -> bool: ...

    def notify(self, message: str, *, timeout: float | None = None) -> None: ...

    def load_picture(self, at: float | None = None, purpose: str = "picture") -> object: ...

    def find_fleets(self) -> Worker[None]: ...

    def list_fleets(self) -> None: ...

    def action_fleets(self) -> None: ...

    def _fleet_chosen(self, choice: str | None) -> None: ...

    def _render_status(self) -> None: ...


class FleetChoice:
    """The fleet picker's worker, messages and `f` key, mixed into the app."""

    feed: Feed
    pinned: bool
    fleet_map: FleetMap | None = None
    fleet_error: str | None = None
    fleets_offered: bool = False
    listing_fleets: bool = False

    @work(thread=True, exclusive=True, group="fleets", description="find the fleets")
    def find_fleets(self: FleetHost) -> None:
        """List the server's fleets off the UI thread; the answer comes as a message."""
        feed = self.feed
        try:
            if not isinstance(feed, FleetFeed):
                raise TypeError("this feed lists no fleets")
            found = feed.fleets()
        except Exception as exc:  # any failure is a line in the picker, never raised
            self.post_message(FleetsFailed(str(exc) or type(exc).__name__))
            return
        self.post_message(FleetsFound(found))

    def list_fleets(self: FleetHost) -> None:
        """Start a listing unless one is already out (a slow server gets one request at a time)."""
        if not self.listing_fleets:
            self.listing_fleets = True
            self.find_fleets()

    def offer_fleets(self: FleetHost) -> None:
        """After a load: list the fleets of a live server, unless they are known already."""
        if self.fleet_map is None and self.feed.live and isinstance(self.feed, FleetFeed):
            self.list_fleets()

    def on_fleets_found(self: FleetHost, message: FleetsFound) -> None:
        self.fleet_map, self.fleet_error, self.listing_fleets = message.fleets, None, False
        screen = self.screen
        if isinstance(screen, FleetScreen):
            screen.show(message.fleets)
        elif (
            len(message.fleets.fleets) > 1
            and isinstance(self.feed, FleetFeed)
            and self.feed.fleet is None
            and not self.fleets_offered
            and not isinstance(screen, ModalScreen)
        ):
            self.action_fleets()
        self._render_status()

    def on_fleets_failed(self: FleetHost, message: FleetsFailed) -> None:
        self.fleet_error, self.listing_fleets = message.error, False
        if isinstance(self.screen, FleetScreen):  # a list already shown stays, with the error under it
            self.screen.show(self.fleet_map, f"The fleets could not be listed: {message.error}")

    def action_fleets(self: FleetHost) -> None:
        feed = self.feed
        if not (feed.live and isinstance(feed, FleetFeed)):
            self.notify("A recording is one picture: the picker lists a live server's fleets.", timeout=4)
            return
        self.fleets_offered = True
        self.list_fleets()  # the list shown now is refreshed when this answers
        current = (self.snapshot.fleet if self.snapshot is not None else None) or feed.fleet
        self.push_screen(FleetScreen(self.fleet_map, current, self.fleet_error), self._fleet_chosen)

    def _fleet_chosen(self: FleetHost, choice: str | None) -> None:
        """Scope the feed to the fleet chosen (or the whole server) and load it now."""
        feed = self.feed
        if choice is None or not isinstance(feed, FleetFeed):
            return
        wanted = None if choice == ALL else choice
        if wanted == feed.fleet:
            return
        self.feed = feed.scoped(wanted)
        self.pinned = False
        self.load_picture()
        self._render_status()


def fleet_status(feed: Feed, snapshot: Snapshot | None, fleets: FleetMap | None) -> Text:
    """The status line's word on the fleet on screen (or asked for, before the first picture),
    or that the picture mixes several fleets and `f` picks one."""
    text = Text()
    shown = snapshot.fleet if snapshot is not None else None
    wanted = feed.fleet if isinstance(feed, FleetFeed) else None
    if shown is not None:
        text.append(f" · fleet {printable(shown)}", style="bold")
    elif snapshot is None and wanted is not None:
        text.append(f" · fleet {printable(wanted)}", style="bold")
    elif fleets is not None and len(fleets.fleets) > 1:
        text.append(f" · all {len(fleets.fleets)} fleets mixed: f picks one", style="bold yellow")
    return text
