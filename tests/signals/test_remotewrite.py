"""Remote write into a temporary Prometheus: the same samples and the same answers as the backfill.

Raw replay writes a fixture's series through Prometheus's remote-write receiver instead of
promtool's backfill. What it must keep: every sample's value and millisecond, gaps as gaps,
every label exactly, and PromQL's answers over them (rates across a counter reset, a
histogram's quantile, the lookback). Each case writes the same series both ways, into two
real servers, and asks both the same queries.
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence

import pytest
from promserver import require_prometheus_binaries

from signals.errors import SignalError
from signals.gridseries import OpenMetricsSeries
from signals.remotewrite import RemoteWriteError, push, write_requests
from signals.tempprom import TemporaryPrometheus, to_openmetrics

START = 1_760_000_000.5  # half a second past the second: the milliseconds must survive
NAN = math.nan
HOURS = 7
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _answer(url: str, path: str, **params: object) -> list[dict[str, object]]:
    """The result of one API call, independent of signals.prometheus."""
    with _NO_PROXY.open(f"{url}/api/v1/{path}?{urllib.parse.urlencode(params)}", timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return sorted(result, key=lambda r: sorted(r["metric"].items()))  # type: ignore[attr-defined]


def _incident() -> list[OpenMetricsSeries]:
    """Seven hours on two grids: gaps, a counter reset, histogram buckets, ±Inf, odd labels."""
    steps15 = HOURS * 240
    gauge = [float(i % 17) if i % 50 else NAN for i in range(steps15)]
    counter = [float(i * 3 if i < steps15 // 2 else (i - steps15 // 2) * 2) for i in range(steps15)]
    steps60 = HOURS * 60
    buckets = [
        ("0.1", [float(i) for i in range(steps60)]),
        ("1", [float(i * 4) for i in range(steps60)]),
        ("+Inf", [float(i * 5) for i in range(steps60)]),
    ]
    series: list[OpenMetricsSeries] = [
        ("vllm:num_requests_running", {"model_name": "llama", "pod": "vllm-0"}, gauge, START, 15.0),
        ("vllm:num_requests_running", {"model_name": "llama", "pod": "vllm-1"}, gauge[::-1], START, 15.0),
        ("vllm:request_success_total", {"model_name": "llama"}, counter, START, 15.0),
        (
            "odd",
            {"path": 'a"b\\c\nd é', "Hostname": "gpu-0"},
            [math.inf, -math.inf, 1e-300, -0.0, 1e300],
            START,
            60.0,
        ),
    ]
    series += [
        (
            "vllm:e2e_request_latency_seconds_bucket",
            {"le": le, "model_name": "llama"},
            values,
            START + 7.0,
            60.0,
        )
        for le, values in buckets
    ]
    return series


@pytest.fixture
def binaries() -> None:
    require_prometheus_binaries()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    """The incident written both ways: (remote write, promtool backfill)."""
    require_prometheus_binaries()
    series = _incident()
    with (
        TemporaryPrometheus(series=series, lookback_delta=30.0) as pushed,
        TemporaryPrometheus(to_openmetrics(series), lookback_delta=30.0) as backfilled,
    ):
        yield pushed.url, backfilled.url


def test_every_sample_label_and_gap_arrives(servers: tuple[str, str]) -> None:
    pushed, _ = servers
    end = START + HOURS * 3600
    for name, labels, values, start, step in _incident():
        selector = (
            "{" + ",".join([f'__name__="{name}"', *(f"{k}={json.dumps(v)}" for k, v in labels.items())]) + "}"
        )
        found = _answer(pushed, "query", query=f"{selector}[{HOURS + 1}h]", time=end)
        assert len(found) == 1, selector
        assert found[0]["metric"] == {"__name__": name, **labels}
        expected = [(round((start + i * step) * 1000), v) for i, v in enumerate(values) if not math.isnan(v)]
        got = [(round(float(t) * 1000), float(v)) for t, v in found[0]["values"]]  # type: ignore[attr-defined]
        assert got == expected, name
        assert [math.copysign(1.0, v) for _, v in got] == [math.copysign(1.0, v) for _, v in expected]


@pytest.mark.parametrize(
    "promql",
    [
        "vllm:num_requests_running",
        "rate(vllm:request_success_total[5m])",
        "histogram_quantile(0.9, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
        "max_over_time(odd[10m])",
        "count by (model_name) (vllm:num_requests_running)",
    ],
)
def test_promql_answers_as_over_the_backfill(servers: tuple[str, str], promql: str) -> None:
    pushed, backfilled = servers
    window = {"query": promql, "start": START - 600, "end": START + HOURS * 3600 + 600, "step": 45}
    answer = _answer(pushed, "query_range", **window)
    assert answer, promql
    assert answer == _answer(backfilled, "query_range", **window)


def test_requests_go_oldest_hour_first_and_large_hours_are_cut() -> None:
    series = _incident()
    whole = list(write_requests(series))
    samples = sum(sum(not math.isnan(v) for v in s[2]) for s in series)
    # Seven hours starting half past a second: the samples fall in eight clock hours at most.
    assert HOURS <= len(whole) <= HOURS + 1
    cut = list(write_requests(series, request_bytes=2_000))
    assert len(cut) > 3 * len(whole)
    assert samples > 0


def test_cut_requests_arrive_whole(servers: tuple[str, str]) -> None:
    _, backfilled = servers
    everything = {"query": '{__name__=~".+"}[8h]', "time": START + 8 * 3600}
    with TemporaryPrometheus(lookback_delta=30.0) as prom:
        assert push(prom.url, _incident(), request_bytes=2_000) > 3 * HOURS
        assert _answer(prom.url, "query", **everything) == _answer(backfilled, "query", **everything)


@pytest.mark.usefixtures("binaries")
def test_a_refused_write_says_what_prometheus_said() -> None:
    late: Sequence[OpenMetricsSeries] = [("up", {"job": "a"}, [1.0], START + 10 * 3600, 15.0)]
    early: Sequence[OpenMetricsSeries] = [("up", {"job": "b"}, [1.0], START, 15.0)]
    with TemporaryPrometheus() as prom:
        push(prom.url, late)
        with pytest.raises(RemoteWriteError, match=r"HTTP 400.*out of bounds") as caught:
            push(prom.url, early)
    assert isinstance(caught.value, SignalError)


def test_an_unreachable_server_is_a_signal_error() -> None:
    with pytest.raises(RemoteWriteError, match=r"remote write to http://127\.0\.0\.1:9 failed"):
        push("http://127.0.0.1:9", [("up", {}, [1.0], START, 15.0)], timeout=2.0)


@pytest.mark.parametrize(
    ("series", "message"),
    [
        ([("1bad", {}, [1.0], START, 15.0)], "invalid metric name"),
        ([("ok", {"__name__": "x"}, [1.0], START, 15.0)], "invalid label name"),
        ([("ok", {}, [1.0], START, 0.0)], "step must be"),
        ([("m", {"a": "1"}, [1.0], START, 15.0), ("m", {"a": "1"}, [2.0], START + 60, 15.0)], "twice"),
    ],
)
def test_what_promtool_would_refuse_is_refused_before_sending(
    series: list[OpenMetricsSeries], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        push("http://127.0.0.1:9", series)
