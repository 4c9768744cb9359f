"""Recorded series first: with `triage rules` evaluated over the window, a live fetch reads the
`triage:*` series of every shaped signal instead of the raw catalog, gives the same frame and
the same diagnosis; recorded series that do not cover the window are read raw instead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from promserver import require_prometheus_binaries

import signals.live
from signals.catalog import QueryOptions, load_catalog
from signals.fixture import load_fixture
from signals.frame import SignalFrame
from signals.live import FetchReport, fetch_frame, resolve_scoped
from signals.prometheus import PrometheusSource
from signals.recorded import record_name, recorded_plans
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from signals.views import render_views
from signals.vocabulary import DEFAULT_MAX_SERIES
from triage.core.walk import diagnose
from triage.rules import load_slo
from triage.rules.render import render_rules
from triage.sources import load_graph

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kv-pressure-vllm-v1-raw.yaml"


def _fetch(
    url: str, at: float, lookback: float, step: float, max_series: int | None = DEFAULT_MAX_SERIES
) -> tuple[SignalFrame, FetchReport]:
    with PrometheusSource(url, timeout=60, max_series=max_series) as source:
        return fetch_frame(source, load_catalog(), QueryOptions(), at, lookback, step)


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, float, float, float, tuple[SignalFrame, FetchReport]]]:
    """A Prometheus with the fixture's raw series, and the rules evaluated over all of it; the
    raw-only fetch taken before the rules existed."""
    require_prometheus_binaries()
    fixture = load_fixture(str(FIXTURE))
    frame = fixture.frame
    text = to_openmetrics((s.signal, dict(s.labels), s.values, frame.start, frame.step) for s in frame.series)
    rules = tmp_path_factory.mktemp("rules") / "triage.yml"
    rules.write_text(render_rules(load_catalog(), load_slo(), QueryOptions(), fleet_labels=()))
    lookback = frame.end - frame.start
    with TemporaryPrometheus(text, lookback_delta=2 * frame.step) as prometheus:
        raw = _fetch(prometheus.url, frame.end, lookback, frame.step)
        prometheus.backfill_rules(rules, frame.start, frame.end + frame.step, frame.step)
        yield prometheus.url, frame.end, lookback, frame.step, raw


def test_recorded_series_are_read_and_give_the_same_frame(
    recorded: tuple[str, float, float, float, tuple[SignalFrame, FetchReport]],
) -> None:
    url, at, lookback, step, (raw_frame, raw_report) = recorded
    # The first samples of a rate over a 5m window are not comparable; the window starts after.
    frame, report = _fetch(url, at, lookback - 600, step)
    read = {name for name, status in report.statuses.items() if status.recorded}
    assert {"ttft_p99_seconds", "tpot_p99_seconds", "request_rate", "error_ratio"} <= read
    assert all(
        report.queries[f"{name}/fleet"].startswith(record_name(name, "fleet"))
        for name in read
        if f"{name}/fleet" in report.queries
    )
    assert not any(s.recorded for s in raw_report.statuses.values())
    # The same fleet, read raw then recorded: only the raw read is worth the hint to record.
    assert report.replicas == raw_report.replicas == len(raw_frame.replica_names()) > 0
    assert raw_report.recorded_views == 0 and report.recorded_views >= len(read)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(signals.live, "RECORDING_PAYS_REPLICAS", raw_report.replicas)
        assert raw_report.recording_would_pay() and not report.recording_would_pay()
        patch.setattr(signals.live, "RECORDING_PAYS_REPLICAS", raw_report.replicas + 1)
        assert not raw_report.recording_would_pay()
    # The fleet views are read in one query per scope, not one per signal.
    assert report.http_requests < raw_report.http_requests
    # The rules were evaluated at their group's own offset (seconds off the query's steps), as
    # in production: the recorded value at a step is the raw one of a few seconds earlier.
    compared, close, gaps = 0, 0, []
    for name in read:
        for row in frame.rows(name):
            twin = next(r for r in raw_frame.rows(name) if r.labels == row.labels)
            theirs = twin.values[len(twin.values) - len(row.values) :]
            both = ~np.isnan(row.values) & ~np.isnan(theirs)
            assert both.sum() >= 0.95 * (~np.isnan(theirs)).sum(), (name, row.labels)
            compared += int(both.sum())
            close += int(np.isclose(row.values[both], theirs[both], rtol=0.05, atol=1e-9).sum())
            gaps.extend(np.abs(row.values[both] - theirs[both]) / np.maximum(np.abs(theirs[both]), 1e-9))
    assert compared > 1000 and close >= 0.8 * compared, (close, compared)
    assert float(np.median(gaps)) < 0.01
    graph = load_graph()
    ours_d = diagnose(graph, frame, "tpot_slow", frame.end)
    raw_d = diagnose(graph, raw_frame, "tpot_slow", raw_frame.end)
    assert ours_d.causes[0].cause == raw_d.causes[0].cause == "kv_pressure"
    assert [c.cause for c in ours_d.causes] == [c.cause for c in raw_d.causes]


def test_the_series_cap_bounds_each_recorded_view_not_their_batch(
    recorded: tuple[str, float, float, float, tuple[SignalFrame, FetchReport]],
) -> None:
    """Each per-replica view is read by a query of its own, so a cap that the raw views fit under
    leaves every recorded view whole: read in one query, the per-replica views of a fleet of
    more replicas than the cap over their count would have had most signals' replicas cut for
    the first few's. A capped recorded answer counts as absent and is read raw."""
    url, at, lookback, step, (raw_frame, _) = recorded
    window = lookback - 600
    with PrometheusSource(url, timeout=60) as source:
        names, resolutions = resolve_scoped(load_catalog(), source, QueryOptions(), at - window, at)
    views = render_views(resolutions, QueryOptions())
    plans = recorded_plans(views, names, views.keys())
    replica_reads = [plan.reads for key, plan in plans.items() if key.endswith("/replica")]
    fleet_keys = [key for key in plans if key.endswith("/fleet")]
    assert len(replica_reads) > 10 and len(set(replica_reads)) == len(replica_reads)
    assert len({plans[key].reads for key in fleet_keys}) < len(fleet_keys)

    uncapped_frame, uncapped = _fetch(url, at, window, step, max_series=None)
    widest = max(len(raw_frame.rows(name)) for name in raw_frame.signals())
    replicas = len(uncapped_frame.rows("request_rate")) - 1  # the fleet's row aside
    cap = max(widest, len(fleet_keys))
    assert cap < len(replica_reads) * replicas  # the per-replica views would not fit in one answer
    frame, report = _fetch(url, at, window, step, max_series=cap)
    assert {k: s.recorded for k, s in report.statuses.items()} == {
        k: s.recorded for k, s in uncapped.statuses.items()
    }
    assert not [s.signal for s in report.statuses.values() if s.warnings]
    for name in uncapped_frame.signals():
        assert {r.labels for r in frame.rows(name)} == {r.labels for r in uncapped_frame.rows(name)}, name


def test_recorded_series_that_miss_the_window_are_read_raw(
    recorded: tuple[str, float, float, float, tuple[SignalFrame, FetchReport]],
) -> None:
    url, at, lookback, step, _ = recorded
    # An hour before the data (and so before the rules' first evaluation): the recorded series
    # hold nothing at the window's first step, and count as absent.
    frame, report = _fetch(url, at, lookback + 3600, step)
    assert not any(s.recorded for s in report.statuses.values())
    assert frame.rows("ttft_p99_seconds")
    assert report.queries["ttft_p99_seconds/fleet"].startswith("histogram_quantile(")


def test_grouping_of_the_catalog_shapes() -> None:
    from signals.views import grouping

    assert grouping("histogram_quantile(0.99, sum by (le, $replica) (rate(x[5m])))", "replica", "pod") == (
        "pod",
    )
    assert grouping("max by ($replica, gpu) (DCGM_FI_DEV_GPU_TEMP)", "replica", "instance") == (
        "instance",
        "gpu",
    )
    assert grouping("sum by (tenant) (label_replace(rate(x[5m]), ...))", "fleet", "") == ("tenant",)
    assert grouping("sum(max by (name) (a) * max by (name) (b))", "fleet", "") == ()


def test_a_fleet_view_answered_by_two_fleets_counts_as_absent() -> None:
    from signals.plan import ViewPlan
    from signals.prometheus import QueryResult
    from signals.prometheus.replies import capped_warning
    from signals.recorded import usable

    times, values = np.array([0.0, 30.0]), np.array([1.0, 2.0])
    plan = ViewPlan("x/fleet", 'triage:x{server=""}', ("batch",))
    one = [({"__name__": "triage:x", "namespace": "a"}, times, values)]
    two = [*one, ({"__name__": "triage:x", "namespace": "b"}, times, values)]
    kept = usable(plan, QueryResult("batch", one), 0.0, 30.0)
    assert kept is not None and kept.series[0][0] == {}
    assert usable(plan, QueryResult("batch", two), 0.0, 30.0) is None
    # Stale: no sample at the window's last step.
    assert usable(plan, QueryResult("batch", one), 0.0, 60.0) is None
    # Per replica, the replica label is required, and only the grouping labels are kept.
    per = ViewPlan("x/replica", "triage:x:replica", ("batch",), replica_label="pod", grouping=("pod",))
    rows = [({"__name__": "triage:x:replica", "pod": "p1", "namespace": "a"}, times, values)]
    got = usable(per, QueryResult("batch", rows), 0.0, 30.0)
    assert got is not None and got.series[0][0] == {"pod": "p1"}
    assert (
        usable(per, QueryResult("batch", [({"__name__": "triage:x:replica"}, times, values)]), 0.0, 30.0)
        is None
    )
    # A capped answer is absent, never a part of the replicas read as the whole fleet.
    assert usable(per, QueryResult("batch", rows, [capped_warning(1, 2)]), 0.0, 30.0) is None
