"""Raw replay: a fixture of exporter series, answered by a real Prometheus through the catalog.

The raw series go out as OpenMetrics, are backfilled with `promtool tsdb create-blocks-from
openmetrics` into a temporary folder, and a temporary Prometheus on a free loopback port
serves them; the catalog then runs through exactly the code path of a live diagnosis
(`signals.live.fetch_frame`), and the Prometheus is stopped. What comes back is the same
fixture with a signal-level frame, ready for the walk.
"""

from __future__ import annotations

from dataclasses import replace

from signals.catalog import Catalog, QueryOptions
from signals.fixture import Fixture
from signals.live import FetchReport, fetch_frame
from signals.prometheus import PrometheusSource
from signals.tempprom import TemporaryPrometheus, to_openmetrics

REPLAY_TIMEOUT = 60.0


def replay_raw(
    fixture: Fixture, catalog: Catalog, options: QueryOptions | None = None
) -> tuple[Fixture, FetchReport]:
    """The fixture with its raw series turned into signals by a temporary Prometheus."""
    frame = fixture.frame
    text = to_openmetrics((s.signal, dict(s.labels), s.values, frame.start, frame.step) for s in frame.series)
    with TemporaryPrometheus(text, lookback_delta=2 * frame.step) as prometheus:
        source = PrometheusSource(prometheus.url, timeout=REPLAY_TIMEOUT)
        signals, report = fetch_frame(
            source,
            catalog,
            options or QueryOptions(),
            at=frame.end,
            lookback=frame.end - frame.start,
            step=frame.step,
        )
    return replace(fixture, frame=signals, level="signal"), report
