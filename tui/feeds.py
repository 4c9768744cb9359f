"""Where the TUI's signals come from: a recorded incident or a live Prometheus.

The app is handed a feed and never builds one, so the CLI and the tests inject the
same thing (a fixture, a real Prometheus, or a Prometheus that stalls). `load` runs in
a thread worker: it may block on the network; it must never touch a widget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from signals.catalog import Catalog, QueryOptions, render
from signals.fixture import Fixture
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


def catalog_queries(catalog: Catalog, options: QueryOptions) -> dict[str, str]:
    """signal -> the PromQL of the catalog's first source for it (replica view first)."""
    out: dict[str, str] = {}
    for signal, sources in catalog.sources.items():
        for spec in sources:
            query = spec.replica or spec.fleet
            if query:
                out[signal] = f"{render(query, options)}    # catalog source: {spec.source}"
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

    @property
    def label(self) -> str:
        return f"live {self.prometheus.url}"

    def load(self, at: float | None = None) -> Snapshot:
        now = self.clock()
        moment = now if at is None else at
        frame, report = fetch_frame(
            self.prometheus, self.catalog, self.options, moment, self.lookback, self.step
        )
        queries = {}
        for key, query in report.queries.items():
            signal, view = key.split("/", 1)
            if view == "replica" or signal not in queries:
                queries[signal] = query
        return Snapshot(frame, frame.end, report.problems(), queries, fetched_at=now)
