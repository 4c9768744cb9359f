"""Raw replay: a fixture of exporter series, answered by a real Prometheus through the catalog.

A temporary Prometheus on a free loopback port is started empty and the raw series are
written into it through its remote-write receiver (`signals.remotewrite`: about a third of
the time promtool's backfill of the same samples takes, and answered alike). The catalog
then runs through exactly the code path of a live diagnosis (`signals.live.fetch_frame`),
and the Prometheus is stopped. What comes back is the same fixture with a signal-level
frame, ready for the walk.

A raw fixture that names its fleet (`expect.fleet`, or `fleet:` at the top) is replayed as
a live `--fleet` is read: the fleets are discovered on the temporary Prometheus and every
exporter's queries are scoped to that one, so another fleet's trouble in the same
recording never becomes its cause.

The server is `pushed_prometheus` unless the caller gives another factory of the same
shape (the series in, a context manager with `.url` out): the tests replay the same
fixtures through VictoriaMetrics that way.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Protocol

from signals.catalog import Catalog, QueryOptions
from signals.fixture import Fixture
from signals.fixturefleet import FixtureFleet, fleet_labels, select_fleet
from signals.fleets import discover
from signals.fleets.inventory import fetch_inventory
from signals.fleets.scope import scoped_options
from signals.gridseries import OpenMetricsSeries
from signals.live import FetchReport, fetch_frame
from signals.prometheus import PrometheusSource
from signals.tempprom import TemporaryPrometheus

REPLAY_TIMEOUT = 60.0


class ReplayServer(Protocol):
    """A running server answering the Prometheus HTTP API at `url`."""

    @property
    def url(self) -> str: ...


class ReplayServerFactory(Protocol):
    """A server over the series; `lookback_delta`: how long a series outlives its last sample."""

    def __call__(
        self, series: Sequence[OpenMetricsSeries], *, lookback_delta: float | None
    ) -> AbstractContextManager[ReplayServer]: ...


def pushed_prometheus(
    series: Sequence[OpenMetricsSeries], *, lookback_delta: float | None
) -> TemporaryPrometheus:
    """A temporary Prometheus that is given the series over remote write once it is up."""
    return TemporaryPrometheus(series=series, lookback_delta=lookback_delta)


def names_a_fleet(fixture: Fixture) -> bool:
    """True when the fixture says which fleet it is about, so its replay is scoped to it."""
    return fixture.fleet is not None or (fixture.expect is not None and fixture.expect.fleet is not None)


def replay_raw(
    fixture: Fixture,
    catalog: Catalog,
    options: QueryOptions | None = None,
    *,
    server: ReplayServerFactory = pushed_prometheus,
) -> tuple[Fixture, FetchReport]:
    """The fixture with its raw series turned into signals by a temporary Prometheus (scoped to
    the fleet it names, which the returned fixture then records)."""
    frame = fixture.frame
    series = [(s.signal, dict(s.labels), s.values, frame.start, frame.step) for s in frame.series]
    options = options or QueryOptions()
    record = fixture.fleet
    with server(series, lookback_delta=2 * frame.step) as prometheus:
        source = PrometheusSource(prometheus.url, timeout=REPLAY_TIMEOUT)
        lookback = frame.end - frame.start
        if names_a_fleet(fixture):
            found = discover(fetch_inventory(source, frame.end, lookback), fleet_labels(fixture.fleet))
            wanted = fixture.expect.fleet if fixture.expect is not None else None
            fleet = select_fleet(fixture.document, found, fixture.fleet, wanted, fixture.expect is not None)
            if fleet is not None:
                options = scoped_options(fleet, options)
                record = FixtureFleet.of(fleet)
        signals, report = fetch_frame(
            source, catalog, options, at=frame.end, lookback=lookback, step=frame.step
        )
    return replace(fixture, frame=signals, level="signal", fleet=record), report
