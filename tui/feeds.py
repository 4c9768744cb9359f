"""Where the TUI's signals come from: a recorded incident or a live Prometheus.

The app is handed a feed and never builds one, so the CLI and the tests inject the
same thing (a fixture, a real Prometheus, or a Prometheus that stalls). `load` runs in
a thread worker: it may block on the network; it must never touch a widget.

A live Prometheus holds many fleets. A `FleetFeed` can list them and be scoped to one:
each load then finds that fleet again over its own window (a rollout's new pods are
read, a dead replica still counts) and scopes every exporter's queries to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from signals.catalog import Catalog, QueryOptions, render
from signals.errors import SignalError
from signals.fixture import Fixture
from signals.fleets import DEFAULT_FLEET_LABELS, Fleet, FleetMap, discover
from signals.fleets.inventory import fetch_inventory
from signals.fleets.scope import scoped_options
from signals.frame import SignalFrame
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource


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


@dataclass
class PrometheusFeed:
    """A live Prometheus: one concurrent round of range queries per load, under one deadline."""

    prometheus: PrometheusSource
    catalog: Catalog
    options: QueryOptions
    lookback: float = 7200.0
    step: float = 30.0
    clock: Callable[[], float] = time.time
    live: bool = True
    fleet: str | None = None
    fleet_labels: tuple[str, ...] = DEFAULT_FLEET_LABELS

    @property
    def label(self) -> str:
        return f"live {self.prometheus.url}"

    def load(self, at: float | None = None) -> Snapshot:
        now = self.clock()
        moment = now if at is None else at
        options, fleet = self.options, self._fleet(moment)
        if fleet is not None:
            options = scoped_options(fleet, options)
        frame, report = fetch_frame(self.prometheus, self.catalog, options, moment, self.lookback, self.step)
        queries = {}
        for key, query in report.queries.items():
            signal, view = key.split("/", 1)
            if view == "replica" or signal not in queries:
                queries[signal] = query
        name = fleet.name if fleet is not None else None
        return Snapshot(frame, frame.end, report.problems(), queries, fetched_at=now, fleet=name)

    def fleets(self, at: float | None = None) -> FleetMap:
        """The fleets the server held over the lookback before `at` (default: now)."""
        moment = self.clock() if at is None else at
        return discover(
            fetch_inventory(self.prometheus, moment, self.lookback, self.options.selector), self.fleet_labels
        )

    def scoped(self, fleet: str | None) -> PrometheusFeed:
        return replace(self, fleet=fleet)

    def _fleet(self, at: float) -> Fleet | None:
        """The fleet to scope to, found again at this moment; SignalError when it names none or several."""
        if self.fleet is None:
            return None
        try:
            return self.fleets(at).one(self.fleet, self.prometheus.url)
        except ValueError as exc:
            raise SignalError(f"fleet: {exc}") from None
