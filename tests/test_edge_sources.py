"""LiteLLM's and Envoy's sources of the edge's signals, evaluated by a real Prometheus.

A few series in each exporter's own names and label shapes, counting at constant rates
chosen so every signal has one right answer: the P99 of a histogram whose observations
all fall in one bucket (Envoy's in milliseconds, read back in seconds), error ratios
that leave out what is not the backend failing (LiteLLM's 429s), a backend with no
failure series at all reading 0 rather than missing, and backends named by their
`api_base` as host:port. Both run on Prometheus and on VictoriaMetrics, to the same answers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numpy as np
import pytest
from vmserver import ENGINES, require_engine, temporary_engine

from signals.catalog import QueryOptions, load_catalog
from signals.frame import SignalFrame
from signals.live import FetchReport, fetch_frame
from signals.prometheus import PrometheusSource
from signals.tempprom import OpenMetricsSeries, to_openmetrics
from signals.timeparse import parse_instant

START = float(parse_instant("2026-10-14T13:00:00Z"))
STEP, N = 15.0, 81
LITELLM_BUCKETS = (0.005, 0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 5.0, 10.0, 30.0, 60.0, 120.0)
ENVOY_BUCKETS = (0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)
A, B = "http://10.42.1.12:8000/v1", "http://10.42.1.13:8000/v1"


def counter(per_step: float, base: float = 1000.0) -> np.ndarray:
    return base + per_step * np.arange(N, dtype=float)


def gauge(value: float) -> np.ndarray:
    return np.full(N, value)


def histogram(
    name: str, labels: Mapping[str, str], edges: tuple[float, ...], inside: float, per_step: float
) -> Iterator[OpenMetricsSeries]:
    """Every observation in the bucket ending at `inside`."""
    for le in (*edges, math.inf):
        values = counter(per_step) if le >= inside else np.zeros(N)
        text = "+Inf" if math.isinf(le) else repr(float(le))
        yield f"{name}_bucket", {**labels, "le": text}, values, START, STEP
    yield f"{name}_count", dict(labels), counter(per_step), START, STEP
    yield f"{name}_sum", dict(labels), counter(per_step * inside), START, STEP


def litellm() -> Iterator[OpenMetricsSeries]:
    target = {"job": "litellm", "instance": "10.42.100.30:4000", "namespace": "gateway"}
    group = {**target, "model_group": "llama", "requested_model": "llama", "api_provider": "openai"}
    yield from histogram("litellm_request_total_latency_metric", group, LITELLM_BUCKETS, 2.5, 10)
    yield "litellm_in_flight_requests", target, gauge(12), START, STEP
    for base, model_id, state in ((A, "a1", 0), (B, "b1", 2)):
        deployment = {**group, "api_base": base, "model_id": model_id}
        yield "litellm_deployment_total_requests_total", deployment, counter(10), START, STEP
        yield (
            "litellm_deployment_state",
            {**target, "api_base": base, "model_id": model_id},
            gauge(state),
            START,
            STEP,
        )
    failed = {**group, "api_base": B, "model_id": "b1", "exception_class": "ServiceUnavailableError"}
    yield (
        "litellm_deployment_failure_responses_total",
        {**failed, "exception_status": "503"},
        counter(5),
        START,
        STEP,
    )
    limited = {**group, "api_base": A, "model_id": "a1", "exception_class": "RateLimitError"}
    yield (
        "litellm_deployment_failure_responses_total",
        {**limited, "exception_status": "429"},
        counter(2),
        START,
        STEP,
    )


def envoy() -> Iterator[OpenMetricsSeries]:
    cluster = {"job": "envoy", "instance": "10.42.100.31:19000", "envoy_cluster_name": "llm"}
    yield from histogram("envoy_cluster_upstream_rq_time", cluster, ENVOY_BUCKETS, 2500, 20)
    for code_class, per_step in (("2", 18), ("5", 2)):
        labels = {**cluster, "envoy_response_code_class": code_class}
        yield "envoy_cluster_upstream_rq_xx", labels, counter(per_step), START, STEP
    yield "envoy_cluster_upstream_cx_connect_fail", cluster, counter(1), START, STEP
    for name, value in (
        ("envoy_cluster_membership_healthy", 5),
        ("envoy_cluster_upstream_rq_pending_active", 7),
        ("envoy_cluster_upstream_rq_active", 30),
    ):
        yield name, cluster, gauge(value), START, STEP


def fetch(engine: str, series: Iterator[OpenMetricsSeries]) -> tuple[SignalFrame, FetchReport]:
    require_engine(engine)
    with temporary_engine(engine, to_openmetrics(series), lookback_delta=2 * STEP) as server:
        source = PrometheusSource(server.url, timeout=30.0)
        end = START + STEP * (N - 1)
        return fetch_frame(source, load_catalog(), QueryOptions(), at=end, lookback=end - START, step=STEP)


def at_end(frame: SignalFrame, signal: str) -> float:
    return float(frame.fleet(signal)[-1])


@pytest.mark.parametrize("engine", ENGINES)
def test_litellm(engine: str) -> None:
    frame, report = fetch(engine, litellm())
    for signal in (
        "gateway_latency_p99_seconds",
        "gateway_inflight",
        "upstream_error_ratio",
        "backends_routed",
    ):
        assert report.statuses[signal].fleet_source == "litellm", signal
    assert at_end(frame, "gateway_latency_p99_seconds") == pytest.approx(2.0 + 0.99 * 0.5)
    assert at_end(frame, "gateway_inflight") == 12
    assert at_end(frame, "upstream_error_ratio") == pytest.approx(5 / 20)  # the 429s are not the backend's
    assert at_end(frame, "backends_routed") == 1  # B is in complete outage
    per_backend = {
        r.label_map["instance"]: float(r.values[-1]) for r in frame.rows("upstream_error_ratio") if r.replica
    }
    assert per_backend == pytest.approx({"10.42.1.12:8000": 0.0, "10.42.1.13:8000": 0.5})


@pytest.mark.parametrize("engine", ENGINES)
def test_envoy(engine: str) -> None:
    frame, report = fetch(engine, envoy())
    for signal in (
        "gateway_latency_p99_seconds",
        "gateway_queue",
        "gateway_inflight",
        "upstream_error_ratio",
        "backends_routed",
    ):
        assert report.statuses[signal].fleet_source == "envoy", signal
    assert at_end(frame, "gateway_latency_p99_seconds") == pytest.approx((1000 + 0.99 * 1500) / 1000)
    assert at_end(frame, "upstream_error_ratio") == pytest.approx((2 + 1) / (20 + 1))
    assert (at_end(frame, "gateway_queue"), at_end(frame, "gateway_inflight")) == (7, 30)
    assert at_end(frame, "backends_routed") == 5
