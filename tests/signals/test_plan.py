"""The fetch plan: every shaped view computed client-side equals what Prometheus answers to the
view's own PromQL, on raw fixtures of each engine flavour served by a real Prometheus.

This is what lets a diagnosis send one query per histogram family and derive fleet views:
if a quantile, a merged fleet histogram, a fleet sum or a ratio of sums drifted from
Prometheus's own answer, a test here fails with the view, the series and the step.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from promserver import require_prometheus_binaries

from signals.catalog import QueryOptions, Resolution, load_catalog, resolve
from signals.fixture import load_fixture
from signals.plan import DIGESTED, answer, digests, plan_round, view_plan
from signals.prometheus import PrometheusSource, QueryResult
from signals.tempprom import TemporaryPrometheus, to_openmetrics
from signals.views import render_views

ROOT = Path(__file__).resolve().parents[2]
FLAVOURS = {
    "vllm": ROOT / "fixtures" / "kv-pressure-vllm-v1-raw.yaml",
    "vllm-mixed": ROOT / "fixtures" / "prefix-cache-miss-vllm-mixed-raw.yaml",
    "sglang": ROOT / "fixtures" / "traffic-burst-sglang-raw.yaml",
    # GPU views aggregated again for the fleet (`signals.across`): DCGM's default counters (the
    # throttle inferred from the SM clock, ECC from remapped rows), a tensor-parallel replica's
    # NVLink and PCIe counters over several GPUs, and the stalled replicas counted.
    "dcgm-default": ROOT / "fixtures" / "stack-dcgm-raw.yaml",
    "nvlink-tp": ROOT / "fixtures" / "interconnect-fault-nvlink-tp-raw.yaml",
    "stalled": ROOT / "fixtures" / "engine-stalled-ready-replica-raw.yaml",
}
ACROSS = {
    "vllm": {"kv_usage_ratio/fleet", "gpu_temp_celsius/fleet", "gpu_xid/fleet", "replicas_stalled/fleet"},
    "sglang": {"kv_usage_ratio/fleet", "replicas_stalled/fleet"},
    "dcgm-default": {"gpu_throttle/fleet", "gpu_ecc_errors/fleet", "gpu_power_watts/fleet"},
    "nvlink-tp": {"gpu_nvlink_errors/fleet", "gpu_pcie_replays/fleet"},
    "stalled": {"replicas_stalled/fleet"},
}
"""Fleet views each fixture must answer from its replica view (at least these)."""


def _points(result: QueryResult) -> dict[tuple[tuple[str, str], ...], dict[float, float]]:
    return {
        tuple(sorted((k, v) for k, v in labels.items() if k != "__name__")): dict(
            zip(times, values, strict=True)
        )
        for labels, times, values in result.series
    }


def differences(ours: QueryResult, theirs: QueryResult) -> list[str]:
    """Every (series, step) where the two answers differ beyond float tolerance, or one is absent."""
    a, b = _points(ours), _points(theirs)
    out = [f"series {labels} only in {'ours' if labels in a else 'Prometheus'}" for labels in set(a) ^ set(b)]
    for labels in set(a) & set(b):
        for t in sorted(set(a[labels]) | set(b[labels])):
            x, y = a[labels].get(t), b[labels].get(t)
            if x is None or y is None:
                out.append(
                    f"{labels} @ {t}: {'ours' if y is None else 'Prometheus'} alone ({x if y is None else y})"
                )
            elif not (math.isnan(x) and math.isnan(y)) and not math.isclose(
                x, y, rel_tol=1e-9, abs_tol=1e-12
            ):
                out.append(f"{labels} @ {t}: ours {x!r}, Prometheus {y!r}")
    return out


Served = tuple[PrometheusSource, float, float, float, str]


@pytest.fixture(scope="module", params=sorted(FLAVOURS))
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    require_prometheus_binaries()
    frame = load_fixture(str(FLAVOURS[request.param])).frame
    text = to_openmetrics((s.signal, dict(s.labels), s.values, frame.start, frame.step) for s in frame.series)
    with TemporaryPrometheus(text) as prometheus, PrometheusSource(prometheus.url, timeout=60) as source:
        yield source, frame.end - frame.start, frame.end, frame.step, request.param


def test_every_shaped_view_equals_prometheus_answer(served: Served) -> None:
    source, lookback, at, step, flavour = served
    options = QueryOptions()
    plan = plan_round(render_views(resolve(load_catalog(), source.metric_names()), options))
    shaped = {
        key: view for key, view in plan.views.items() if view.shape is not None or view.reads != (view.query,)
    }
    assert shaped, "the fixture resolves no shaped source"
    start = at - lookback
    answers = source.range_queries({q: q for q in plan.queries}, start, at, step)
    grid = start + step * np.arange(round(lookback / step) + 1, dtype=np.float64)
    ours = answer(plan, answers, grid, step)
    theirs = source.range_queries({key: view.query for key, view in shaped.items()}, start, at, step)
    compared = 0
    for key in shaped:
        assert theirs[key].error is None, (key, theirs[key].error)
        assert ours[key].error is None, (key, ours[key].error)
        diff = differences(ours[key], theirs[key])
        assert not diff, f"{key} ({shaped[key].query}):\n" + "\n".join(diff[:10])
        compared += sum(len(t) for _, t, _ in theirs[key].series)
    assert compared > 1000
    # Fewer queries than views: each histogram family is one query for all its quantiles and views.
    assert len(plan.queries) < len(plan.views)
    across = {key for key, view in plan.views.items() if view.across}
    assert ACROSS.get(flavour, set()) <= across, f"not derived: {ACROSS[flavour] - across}"
    for key in across:
        # The replica view's own query is what the fleet view reads: the round sends one, not two.
        assert plan.views[key].reads == (plan.views[key.replace("/fleet", "/replica")].query,), key


def test_views_digested_as_their_answers_arrive_are_the_same_to_the_last_bit(served: Served) -> None:
    """`digests` computes a histogram family's views in the round, as its answer arrives, so
    the round never holds every family's buckets at once: its views are `answer`'s own."""
    source, lookback, at, step, _ = served
    plan = plan_round(render_views(resolve(load_catalog(), source.metric_names()), QueryOptions()))
    start = at - lookback
    grid = start + step * np.arange(round(lookback / step) + 1, dtype=np.float64)
    digest = digests(plan, grid, step)
    families = {
        q for q, view in ((q, v) for v in plan.views.values() for q in v.reads) if view.shape == "histogram"
    }
    assert digest and set(digest) <= families
    plain = source.range_queries({q: q for q in plan.queries}, start, at, step)
    # the same answers, the families digested (no second request: a sum's last bits may differ)
    digested = {
        q: QueryResult(r.query, digest[q](r.series), r.warnings) if q in digest else r
        for q, r in plain.items()
    }
    assert all(labels[DIGESTED] for q in digest for labels, _, _ in digested[q].series)
    ours, theirs = answer(plan, plain, grid, step), answer(plan, digested, grid, step, digest)
    assert list(ours) == list(theirs) == list(plan.views)
    compared = 0
    for key in plan.views:
        a, b = ours[key], theirs[key]
        assert [labels for labels, _, _ in a.series] == [labels for labels, _, _ in b.series], key
        for (_, ta, va), (_, tb, vb) in zip(a.series, b.series, strict=True):
            assert np.array_equal(ta, tb) and np.array_equal(va, vb, equal_nan=True), key
            compared += len(va)
    assert compared > 1000
    # and the round itself digests them as they arrive
    round_digested = source.range_queries({q: q for q in digest}, start, at, step, digest)
    for q, result in round_digested.items():
        assert result.error is None and {labels[DIGESTED] for labels, _, _ in result.series} == {
            labels[DIGESTED] for labels, _, _ in digested[q].series
        }


def test_the_comparison_catches_a_drift(served: Served) -> None:
    source, lookback, at, step, _ = served
    spec = next(s for s in load_catalog().sources["ttft_p99_seconds"] if s.applies(source.metric_names()))
    resolution = Resolution("ttft_p99_seconds", spec, spec)
    view = view_plan(render_views({"ttft_p99_seconds": resolution}, QueryOptions())["ttft_p99_seconds/fleet"])
    theirs = source.range_queries({"x": view.query}, at - lookback, at, step)["x"]
    labels, times, values = theirs.series[0]
    nudged = QueryResult(view.query, [(labels, times, [v * (1 + 1e-6) for v in values])])
    assert differences(nudged, theirs)
    missing = QueryResult(view.query, [(labels, times[1:], values[1:])])
    assert differences(missing, theirs)


def test_one_family_query_serves_both_quantiles_and_views() -> None:
    catalog = load_catalog()
    options = QueryOptions(selector='namespace="llm"')
    names = {"vllm:time_to_first_token_seconds_bucket"}
    plan = plan_round(render_views(resolve(catalog, names), options))
    ttft = [
        plan.views[f"{s}/{v}"] for s in ("ttft_p50_seconds", "ttft_p99_seconds") for v in ("replica", "fleet")
    ]
    # Per replica, the bucket rates themselves (summed by le and replica client-side).
    assert {view.reads for view in ttft} == {
        ('rate(vllm:time_to_first_token_seconds_bucket{namespace="llm",server=""}[5m])',)
    }
    assert [view.merge for view in ttft] == [False, True, False, True]
    # The views still stand for the catalog's own PromQL (reports and errors show it).
    assert ttft[1].query.startswith("histogram_quantile(0.5, sum by (le) (")
    # A diagnosis that reads no TTFT per replica asks for the fleet's buckets alone.
    fleet_only = plan_round(
        render_views(resolve(catalog, names), options), replica_histograms={"tpot_p99_seconds"}
    )
    assert "ttft_p99_seconds/replica" not in fleet_only.views
    assert fleet_only.views["ttft_p99_seconds/fleet"].reads == (
        'sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{namespace="llm",server=""}[5m]))',
    )
