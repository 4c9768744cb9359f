"""Where VictoriaMetrics answers the Prometheus API differently, and how the product copes.

Each test pins one difference docs/victoriametrics.md lists: the harness itself (missing
binary, millisecond timestamps, nothing left behind), range queries aligned to the step
by the response cache, metric names outside the diagnosed window, partial answers flagged
`isPartial`, error texts that echo the query, and the highest prompt bucket read with
`histogram_quantile(1, ...)` over sums taken in another order. Where the difference is in
the engine, the test runs on both engines and asks for the same answer.
"""

from __future__ import annotations

import json
import math
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from promserver import PromStandIn, Reply
from vmserver import (
    ENGINES,
    TemporaryVictoriaMetrics,
    VictoriaMetricsNotInstalled,
    require_engine,
    require_victoriametrics_binary,
    temporary_engine,
    to_exposition,
)

from signals.catalog import QueryOptions, load_catalog, render
from signals.live import fetch_frame
from signals.prometheus import PrometheusSource, replies
from signals.prometheus import streamed as streamed_module
from signals.prometheus.canonical import canonical_series
from signals.prometheus.replies import PARTIAL
from signals.tempprom import OpenMetricsSeries, to_openmetrics

START = 1_791_000_007.0
"""Seven seconds past a multiple of the step: a grid VictoriaMetrics' cache would move."""
STEP = 15.0
N = 121
EDGES = ("500.0", "1000.0", "2000.0", "5000.0", "10000.0", "+Inf")


def prompt_buckets() -> Iterator[OpenMetricsSeries]:
    """24 replicas whose prompts all fit in 2000 tokens, counted in awkward steps.

    Summed by `le` across replicas in an order that differs from bucket to bucket, the
    2000, 5000, 10000 and +Inf rates land a few ulps apart; only the 2000 edge is right.
    """
    rng = np.random.default_rng(3)
    for replica in range(24):
        below = np.cumsum(rng.integers(1, 9, N)).astype(float)
        middle = below + np.cumsum(rng.integers(0, 5, N))
        top = middle + np.cumsum(rng.integers(0, 3, N))
        counts = {"500.0": below, "1000.0": middle} | dict.fromkeys(EDGES[2:], top)
        for le, values in counts.items():
            labels = {"instance": f"10.42.3.{replica}:8000", "job": "vllm", "le": le}
            yield "vllm:request_prompt_tokens_bucket", labels, values, START, STEP
    yield (
        "vllm:num_requests_running",
        {"instance": "10.42.3.0:8000", "job": "vllm"},
        np.full(N, 3.0),
        START,
        STEP,
    )


@pytest.fixture(scope="module")
def text() -> str:
    return to_openmetrics(prompt_buckets())


# ------------------------------------------------------------------ the harness


def test_exposition_has_millisecond_timestamps_and_keeps_escaped_labels() -> None:
    om = to_openmetrics([("x_total", {"path": 'a "b" c\\d'}, [1.0, math.inf], 1_791_000_000.015, 0.5)])
    lines, span = to_exposition(om)
    assert lines == [
        'x_total{path="a \\"b\\" c\\\\d"} 1.0 1791000000015',
        'x_total{path="a \\"b\\" c\\\\d"} +Inf 1791000000515',
    ]
    assert span == (1_791_000_000_015, 1_791_000_000_515)
    assert to_exposition("# EOF\n") == ([], None)


def test_the_import_keeps_escaped_labels_and_infinities() -> None:
    require_victoriametrics_binary()
    path = 'a "b" c\\d e'
    om = to_openmetrics([("x:y_total", {"path": path}, [1.0, math.inf], 1_791_000_000.015, 0.5)])
    with TemporaryVictoriaMetrics(om) as server:
        result = PrometheusSource(server.url, timeout=10).instant_query("x:y_total", at=1_791_000_000.515)
    assert [(labels, values.tolist()) for labels, _, values in result.series] == [
        ({"__name__": "x:y_total", "path": path}, [math.inf])
    ]


def test_a_missing_binary_names_the_debian_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(VictoriaMetricsNotInstalled, match="install the Debian package `victoria-metrics`"):
        TemporaryVictoriaMetrics().start()
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="victoria-metrics"):
        require_victoriametrics_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="NOT RUN"):
        require_victoriametrics_binary()


def test_a_stopped_server_leaves_no_process_and_no_folder(text: str) -> None:
    require_victoriametrics_binary()
    server = TemporaryVictoriaMetrics(text)
    with server:
        pid, folder = server.pid, server.directory
        assert pid is not None and (folder / "data").is_dir()
        names = PrometheusSource(server.url, timeout=10).metric_names()
        assert names == {"vllm:request_prompt_tokens_bucket", "vllm:num_requests_running"}
    assert not folder.exists() and server.pid is None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    server.stop()  # idempotent
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url


# ------------------------------------------------------------------ what the product does about them


def test_range_queries_land_on_the_grid_asked_for(text: str) -> None:
    """VictoriaMetrics' response cache moves start and end to multiples of the step; `nocache=1` does not."""
    require_victoriametrics_binary()
    start, end = START + 300, START + STEP * (N - 1)
    grid = (start + STEP * np.arange(round((end - start) / STEP) + 1)).tolist()
    query = "sum(vllm:num_requests_running)"
    with TemporaryVictoriaMetrics(text, disable_cache=False) as server:
        result = PrometheusSource(server.url, timeout=10).range_queries({"q": query}, start, end, STEP)["q"]
        assert result.series[0][1].tolist() == grid
        with PromStandIn(Reply.proxied(server.url)) as stand_in:
            PrometheusSource(stand_in.url, timeout=10).range_queries({"q": query}, start, end, STEP)
            assert stand_in.seen[0].params["nocache"] == ["1"]
        params = {"query": query, "start": start, "end": end, "step": STEP}
        aligned = _get(f"{server.url}/api/v1/query_range?{urllib.parse.urlencode(params)}")
    times = [point[0] for point in aligned["data"]["result"][0]["values"]]
    assert times[0] == start - 7 and times[-1] == end - 7  # what the product would get without nocache=1


@pytest.mark.parametrize("engine", ENGINES)
def test_metric_names_are_those_of_the_window_diagnosed(engine: str, text: str) -> None:
    require_engine(engine)
    end = START + STEP * (N - 1)
    with temporary_engine(engine, text) as server, PrometheusSource(server.url, timeout=10) as source:
        assert source.metric_names(start=START - 86400 * 30, end=START - 86400 * 29) == set()
        assert "vllm:num_requests_running" in source.metric_names(start=START, end=end)
        with PromStandIn(Reply.proxied(server.url)) as stand_in, PrometheusSource(stand_in.url) as proxied:
            fetch_frame(proxied, load_catalog(), QueryOptions(), at=end, lookback=1800, step=STEP)
            names = next(s for s in stand_in.seen if s.path == "/api/v1/label/__name__/values")
            assert (names.params["start"], names.params["end"]) == ([f"{end - 1800:.0f}"], [f"{end:.0f}"])


def test_a_partial_answer_of_a_cluster_is_partial_data() -> None:
    body: dict[str, object] = {
        "status": "success",
        "isPartial": True,
        "stats": {"seriesFetched": "0", "executionTimeMsec": 1},
        "data": {"resultType": "vector", "result": []},
    }
    with PromStandIn(Reply(body=json.dumps(body).encode())) as stand_in:
        result = PrometheusSource(stand_in.url, timeout=5).instant_query("up")
    assert result.ok and result.partial and result.warnings == [PARTIAL]
    body["isPartial"] = False
    with PromStandIn(Reply(body=json.dumps(body).encode())) as stand_in:
        result = PrometheusSource(stand_in.url, timeout=5).instant_query("up")
    assert result.ok and not result.partial and result.series == []


def test_an_error_keeps_its_reason_rather_than_the_echoed_query(text: str) -> None:
    require_victoriametrics_binary()
    broken = 'sum by (instance) (rate(vllm:request_prompt_tokens_bucket{le="2000.0"}[5m])'
    with TemporaryVictoriaMetrics(text) as server:
        result = PrometheusSource(server.url, timeout=10).instant_query(broken, at=START + 600)
    assert result.error is not None and result.error_kind == "422"
    assert "vllm:request_prompt_tokens_bucket" not in result.error and '"…"' in result.error
    assert "unexpected token" in result.error


@pytest.mark.parametrize("engine", ENGINES)
def test_the_highest_prompt_bucket_is_its_edge_on_both_engines(engine: str, text: str) -> None:
    """`prompt_tokens_max_bucket` rounds the summed rates, so a sum in another order does not move it."""
    require_engine(engine)
    source = next(s for s in load_catalog().sources["prompt_tokens_max_bucket"] if s.source == "vllm")
    assert source.fleet is not None and source.replica is not None
    options = QueryOptions(selector='job="vllm"')
    queries = {"fleet": render(source.fleet, options), "replica": render(source.replica, options)}
    with temporary_engine(engine, text) as server:
        results = PrometheusSource(server.url, timeout=20).range_queries(
            queries, START + 300, START + STEP * (N - 1), STEP
        )
    fleet = results["fleet"].series[0][2]
    assert len(fleet) == N - 20 and set(fleet.tolist()) == {2000.0}
    assert {v for _, _, values in results["replica"].series for v in values.tolist()} == {2000.0}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_reply_read_as_it_streams_in_is_the_reply_read_whole_on_both_engines(
    engine: str, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each engine's own JSON is cut into series as it arrives (`signals.prometheus.streamed`),
    and each series but the last (parsed with the envelope) is read in the engine's own form
    (`signals.prometheus.canonical`), to the same bits as JSON reads it."""
    require_engine(engine)
    query = 'rate(vllm:request_prompt_tokens_bucket{job="vllm"}[5m])'
    read = {"canonical": 0, "declined": 0}

    def counted(piece: bytes, reply: replies.ReplyArrays) -> object:
        parsed = canonical_series(piece, reply)
        read["declined" if parsed is None else "canonical"] += 1
        return parsed

    with temporary_engine(engine, text) as server:
        source = PrometheusSource(server.url, timeout=20)
        whole = source.range_queries({"q": query}, START + 300, START + STEP * (N - 1), STEP)["q"]
        monkeypatch.setattr(replies, "STREAMED_REPLY_BYTES", 0)
        monkeypatch.setattr(streamed_module, "canonical_series", counted)
        streamed = source.range_queries({"q": query}, START + 300, START + STEP * (N - 1), STEP)["q"]
    assert whole.ok and streamed.ok and len(whole.series) == 24 * len(EDGES)
    assert read == {"canonical": len(whole.series) - 1, "declined": 0}
    assert [labels for labels, _, _ in streamed.series] == [labels for labels, _, _ in whole.series]
    for (_, t1, v1), (_, t2, v2) in zip(whole.series, streamed.series, strict=True):
        assert t1.tobytes() == t2.tobytes() and v1.tobytes() == v2.tobytes()


def _get(url: str) -> dict[str, Any]:
    """A GET straight to the server, never through an `http_proxy` from the environment."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        reply: dict[str, Any] = json.loads(response.read())
        return reply
