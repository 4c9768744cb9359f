"""Where the TUI's signals come from: a recorded incident, or a live Prometheus (`tui.livefeed`).

The app is handed a feed and never builds one, so the CLI and the tests inject the
same thing (a fixture, a real Prometheus, or a Prometheus that stalls). `load` runs in
a thread worker: it may block on the network; it must never touch a widget. The live
feed lives in its own module, so a replay loads no HTTP client.

A live Prometheus holds many fleets. A `FleetFeed` can list them and be scoped to one:
each load then finds that fleet again over its own window (a rollout's new pods are
read, a dead replica still counts) and scopes every exporter's queries to it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from signals.catalog import Catalog, QueryOptions, render
from signals.fixture import Fixture
from signals.fleets import FleetMap
from signals.frame import SignalFrame

if TYPE_CHECKING:
    from signals.prometheus import ReadProgress


@dataclass(frozen=True)
class Snapshot:
    """One load: the frame, the moment to diagnose, and what could not be read."""

    frame: SignalFrame
    at: float
    problems: dict[str, str] = field(default_factory=dict)
    queries: dict[str, str] = field(default_factory=dict)
    fetched_at: float | None = None
    fleet: str | None = None
    """The name of the fleet the signals were scoped to; None for a whole server or a recording."""


class Feed(Protocol):
    """A source of snapshots; `live` feeds are refreshed, replay feeds have a time cursor."""

    @property
    def live(self) -> bool:
        """True for a feed that changes with time (refreshed), False for a recording (cursor)."""
        ...

    @property
    def label(self) -> str:
        """What the status line calls the source."""
        ...

    def load(self, at: float | None = None) -> Snapshot:
        """The signals up to `at` (default: now for live, the incident's moment for replay)."""
        ...


@runtime_checkable
class FleetFeed(Feed, Protocol):
    """A feed whose server holds fleets it can list and be scoped to (the fleet picker's)."""

    @property
    def fleet(self) -> str | None:
        """The fleet every load is scoped to (a name or labels, as `--fleet` takes); None: all."""
        ...

    def fleets(self) -> FleetMap:
        """Every fleet the server holds now (blocks on the network: call it from a worker)."""
        ...

    def scoped(self, fleet: str | None) -> FleetFeed:
        """The same feed scoped to `fleet` (None: the whole server)."""
        ...


@runtime_checkable
class ReadingFeed(Feed, Protocol):
    """A feed whose loads can be watched as they read (a live server: a large fleet takes
    seconds, and the screen says how far a load has come)."""

    def reading(self, progress: Callable[[ReadProgress], None]) -> AbstractContextManager[None]:
        """While inside, `progress` hears each request of the loads as it ends, from zero
        (called from other threads)."""
        ...


def catalog_queries(catalog: Catalog, options: QueryOptions) -> dict[str, str]:
    """signal -> the PromQL of the catalog's first source for it (replica view first)."""
    out: dict[str, str] = {}
    for signal, sources in catalog.sources.items():
        for spec in sources:
            query = spec.replica or spec.fleet
            if query:
                out[signal] = f"{render(query, options, spec.exporter)}    # catalog source: {spec.source}"
                break
    return out


@dataclass
class FixtureFeed:
    """A recorded incident; the queries shown are what the catalog would run live."""

    fixture: Fixture
    catalog: Catalog
    live: bool = False

    @property
    def label(self) -> str:
        return f"replay {self.fixture.name}"

    def load(self, at: float | None = None) -> Snapshot:
        return Snapshot(
            self.fixture.frame,
            self.fixture.at if at is None else at,
            queries=catalog_queries(self.catalog, QueryOptions()),
        )
