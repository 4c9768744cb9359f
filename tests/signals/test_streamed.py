"""A large reply is read series by series as it arrives (`signals.prometheus.streamed`).

Whatever the chunks, the reply reads as orjson would read it whole: the same series, labels
and samples, the envelope's warnings kept, a reply cut anywhere between its chunks. A reply
the cut cannot follow is read whole; a body cut off by the server is a transient failure.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import orjson
import pytest
from promserver import PromStandIn, Reply

from signals.prometheus import PrometheusSource, replies
from signals.prometheus.replies import _parse_series
from signals.prometheus.streamed import load_chunks

START = 1_760_000_000.0


def matrix(n: int, *, tricky: bool = True) -> list[dict[str, Any]]:
    """`n` series; some with labels holding the cut's own bytes, quotes and braces escaped."""
    out = []
    for i in range(n):
        labels = {"__name__": "x", "pod": f"pod-{i}", "le": str(0.1 * (i % 4))}
        if tricky and i % 3 == 0:
            labels["note"] = '},{"metric":{"a":"b"}}]'
        values = [[START + 15 * k, "NaN" if (i + k) % 7 == 0 else str(i + k / 10)] for k in range(5)]
        out.append({"metric": labels, "values": values})
    return out


def body(series: list[dict[str, Any]], warnings: list[str] | None = None) -> bytes:
    envelope: dict[str, Any] = {"status": "success", "data": {"resultType": "matrix", "result": series}}
    if warnings is not None:
        envelope["warnings"] = warnings
    return orjson.dumps(envelope)


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def same(ours: object, whole: bytes) -> None:
    """The streamed envelope reads as the whole one: same warnings, same series and samples."""
    expected = orjson.loads(whole)
    assert isinstance(ours, dict)
    assert {k: v for k, v in ours.items() if k != "data"} == {
        k: v for k, v in expected.items() if k != "data"
    }
    got, want = _parse_series(ours["data"]), _parse_series(expected["data"])
    assert [labels for labels, _, _ in got] == [labels for labels, _, _ in want]
    for (_, t1, v1), (_, t2, v2) in zip(got, want, strict=True):
        assert np.array_equal(t1, t2) and np.array_equal(v1, v2, equal_nan=True)


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replies, "STREAMED_REPLY_BYTES", 0)


@pytest.mark.parametrize("size", [1, 7, 11, 64, 1000, 1 << 20])
def test_any_chunking_reads_as_the_whole_reply(streamed: None, size: int) -> None:
    whole = body(matrix(40), warnings=["some storage was slow"])
    same(load_chunks(chunked(whole, size)), whole)


def test_a_small_reply_is_parsed_whole_and_a_large_one_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = body(matrix(10))
    monkeypatch.setattr(replies, "STREAMED_REPLY_BYTES", len(whole))
    small = load_chunks(chunked(whole, 100))
    assert isinstance(small, dict) and isinstance(small["data"]["result"][0], dict)  # plain JSON
    monkeypatch.setattr(replies, "STREAMED_REPLY_BYTES", len(whole) - 1)
    large = load_chunks(chunked(whole, 100))
    assert isinstance(large, dict) and not isinstance(large["data"]["result"][0], dict)  # made arrays
    same(large, whole)


def test_series_with_other_key_orders_or_spacing_are_read_too(streamed: None) -> None:
    series = matrix(12, tricky=False)
    reordered = [{"values": s["values"], "metric": s["metric"]} if i % 2 else s for i, s in enumerate(series)]
    for whole in (body(reordered), json.dumps(json.loads(body(series)), indent=1).encode()):
        same(load_chunks(chunked(whole, 9)), whole)


def test_a_reply_without_a_result_list_is_read_whole(streamed: None) -> None:
    error = orjson.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"})
    assert load_chunks(chunked(error, 5)) == orjson.loads(error)
    vector = orjson.dumps({"status": "success", "data": {"resultType": "scalar", "result": [START, "1"]}})
    assert load_chunks(chunked(vector, 5)) == orjson.loads(vector)
    with pytest.raises(ValueError):
        load_chunks(chunked(body(matrix(3))[:-10], 5))


def test_series_sampled_alike_share_one_read_only_times_array(streamed: None) -> None:
    reply = load_chunks(chunked(body(matrix(30)), 50))
    series = _parse_series(reply["data"])  # type: ignore[index]
    assert len({id(times) for _, times, _ in series}) == 1
    with pytest.raises(ValueError):
        series[0][1][0] = 0.0


def test_a_large_reply_over_http_reads_as_a_small_one(monkeypatch: pytest.MonkeyPatch) -> None:
    series = matrix(300)
    with (
        PromStandIn(Reply.success(series, warnings=["partial"])) as stand,
        PrometheusSource(stand.url) as source,
    ):
        whole = source.range_queries({"q": "x"}, START, START + 60, 15.0)["q"]
        monkeypatch.setattr(replies, "STREAMED_REPLY_BYTES", 0)
        streamed = source.range_queries({"q": "x"}, START, START + 60, 15.0)["q"]
    assert whole.warnings == streamed.warnings == ["partial"]
    assert [labels for labels, _, _ in whole.series] == [labels for labels, _, _ in streamed.series]
    assert all(
        np.array_equal(a[2], b[2], equal_nan=True) for a, b in zip(whole.series, streamed.series, strict=True)
    )
    assert math.isnan(streamed.series[0][2][0])  # "NaN" read as NaN


def test_a_body_cut_off_midway_is_a_transient_failure_named_so(streamed: None) -> None:
    full = Reply.success(matrix(200))
    with (
        PromStandIn(Reply.cut(full, len(full.body) // 2)) as stand,
        PrometheusSource(stand.url, timeout=5, max_retries=1) as source,
    ):
        result = source.range_queries({"q": "x"}, START, START + 60, 15.0)["q"]
    assert result.error is not None and result.error.startswith("reply cut off: ")
    assert result.error_kind == "unreachable" and result.http_requests == 2  # retried once
    assert "query" not in result.error  # the URL is shown without its query
