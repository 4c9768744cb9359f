"""The live feed: a Prometheus read in one concurrent round of range queries per load.

Apart from `tui.feeds` so that a replay never loads the HTTP client, the catalog's live
queries or fleet discovery; `live_feed` reads the live options as `triage tui
--prometheus` takes them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from signals.catalog import Catalog, QueryOptions
from signals.errors import SignalError
from signals.fleets import DEFAULT_FLEET_LABELS, Fleet, FleetMap, discover
from signals.fleets.inventory import fetch_inventory
from signals.fleets.scope import scoped_options
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource, ReadProgress
from triage.inputs.arguments import duration_arg
from triage.inputs.errors import SourceArgError
from triage.inputs.sources import catalog, fleet_labels, prometheus_source, query_options
from tui.feeds import Snapshot


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

    def reading(self, progress: Callable[[ReadProgress], None]) -> AbstractContextManager[None]:
        return self.prometheus.reading(progress)

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


def _fleet_arg(value: str | None) -> str | None:
    """`--fleet` as written: each load finds the fleet it names again (its pods change with
    rollouts), so only its syntax can be checked before the screen takes over."""
    if not value:
        return None
    try:
        FleetMap(()).find(value)
    except ValueError as exc:
        raise SourceArgError(f"--fleet: {exc}") from None
    return value.strip()


def live_feed(args: argparse.Namespace) -> PrometheusFeed:
    """The feed the live options describe; SourceArgError names the first option that cannot work."""
    return PrometheusFeed(
        prometheus_source(args),
        catalog(args),
        query_options(args),
        lookback=duration_arg(args.lookback, "--lookback"),
        step=duration_arg(args.step, "--step"),
        fleet=_fleet_arg(args.fleet),
        fleet_labels=fleet_labels(args),
    )
