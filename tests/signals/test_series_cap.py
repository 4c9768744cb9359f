"""A reply of 10,000 series is capped: the first ones by labels kept, the cap named in the diagnosis.

The seam is played by the stand-in (`tests/promserver.py`) answering a 10,000-series matrix
in the Prometheus API's shape; the diagnosis runs against a real, backfilled Prometheus
with one signal's query answered by the stand-in instead.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from promserver import PromStandIn, Reply
from test_live import AT, live_diagnose, raw_kv_incident
from vmserver import require_engine, temporary_engine

from signals.catalog import QueryOptions, load_catalog, render
from signals.prometheus import PrometheusSource, replies
from triage.cli.common import EXIT_OK

START = 1_760_000_000.0
STEP = 15.0


def pods(
    n: int, *, at: float = START, shuffled: bool = True, le: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """`n` series (or `n` replicas × the `le` buckets), value i, in a shuffled order."""
    out = []
    for i in range(n):
        for bucket in le or ("",):
            labels = {"__name__": "x", "job": "vllm", "pod": f"pod-{i:05d}"}
            if bucket:
                labels["le"] = bucket
            out.append({"metric": labels, "values": [[at, str(i)], [at + STEP, "NaN"]]})
    if shuffled:
        random.Random(7).shuffle(out)
    return out


@pytest.fixture(params=["parsed-whole", "parsed-series-by-series"])
def parse_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a reply is parsed: small ones whole (orjson), large ones series by series."""
    if request.param == "parsed-series-by-series":
        monkeypatch.setattr(replies, "STREAMED_REPLY_BYTES", 0)
    return str(request.param)


def range_query(series: list[dict[str, Any]], **options: Any) -> Any:
    with (
        PromStandIn(Reply.success(series)) as stand,
        PrometheusSource(stand.url, timeout=20, **options) as source,
    ):
        return source.range_queries({"q": "x"}, START, START + 60, STEP)["q"]


def test_ten_thousand_series_keep_the_first_two_thousand_by_labels(parse_path: str) -> None:
    result = range_query(pods(10_000))
    assert result.ok and result.partial
    assert result.warnings == ["capped: 2000 of 10000 series (the first 2000 by labels kept, 8000 dropped)"]
    kept = [labels["pod"] for labels, _, _ in result.series]
    assert kept == [f"pod-{i:05d}" for i in range(2000)]  # whatever order the server answered in
    labels, times, values = result.series[1234]
    assert labels["pod"] == "pod-01234" and values[0] == 1234.0 and values[1] != values[1]  # NaN
    assert list(times) == [START, START + STEP]


def test_the_cap_is_an_option_and_zero_keeps_everything(parse_path: str) -> None:
    assert len(range_query(pods(10_000), max_series=0).series) == 10_000
    assert range_query(pods(10_000), max_series=0).warnings == []
    small = range_query(pods(10_000), max_series=10)
    assert [labels["pod"] for labels, _, _ in small.series] == [f"pod-{i:05d}" for i in range(10)]
    assert small.warnings[0].startswith("capped: 10 of 10000 series")
    assert range_query(pods(2000)).warnings == []  # at the cap: nothing dropped, nothing said
    with pytest.raises(ValueError, match="max_series"):
        PrometheusSource("http://127.0.0.1:9", max_series=-1)


def test_a_capped_histogram_keeps_whole_replicas_never_loose_buckets(parse_path: str) -> None:
    buckets = ("0.1", "0.5", "1", "+Inf")
    result = range_query(pods(300, le=buckets), max_series=100)
    assert result.warnings == ["capped: 100 of 300 series (the first 100 by labels kept, 200 dropped)"]
    kept: dict[str, set[str]] = {}
    for labels, _, _ in result.series:
        kept.setdefault(labels["pod"], set()).add(labels["le"])
    assert sorted(kept) == [f"pod-{i:05d}" for i in range(100)]
    assert all(found == set(buckets) for found in kept.values())


def test_a_malformed_sample_in_a_large_reply_is_a_bad_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replies, "STREAMED_REPLY_BYTES", 0)
    broken = pods(3, shuffled=False)
    broken[1]["values"] = [[START, "not a number"]]
    result = range_query(broken)
    assert not result.ok and result.error_kind == "malformed" and "bad samples" in (result.error or "")


def test_instant_queries_are_not_capped() -> None:
    """Fleet discovery reads every fleet of the server in one instant query."""
    vector = [{"metric": {"pod": f"pod-{i:05d}"}, "value": [START, "1"]} for i in range(3000)]
    with (
        PromStandIn(Reply.success(vector, result_type="vector")) as stand,
        PrometheusSource(stand.url) as source,
    ):
        result = source.instant_query("x", START)
    assert len(result.series) == 3000 and result.warnings == []


# ------------------------------------------------------------------ in the diagnosis


@pytest.fixture(scope="module")
def prometheus() -> Iterator[str]:
    require_engine("prometheus")
    with temporary_engine("prometheus", raw_kv_incident()) as server:
        yield server.url


def kv_replica_query() -> str:
    kv = load_catalog().sources["kv_usage_ratio"][0]
    assert kv.replica is not None
    return render(kv.replica, QueryOptions(selector='job="vllm"'))


def test_the_diagnosis_names_the_cap_in_json_and_text(
    prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = {kv_replica_query(): [Reply.success(pods(10_000, at=AT - 60))]}
    with PromStandIn(Reply.proxied(prometheus), by_query=huge) as stand_in:
        assert live_diagnose(stand_in.url) == EXIT_OK
        data = json.loads(capsys.readouterr().out)
        reason = data["signal_problems"]["kv_usage_ratio"]
        assert (
            reason
            == "partial data: capped: 2000 of 10000 series (the first 2000 by labels kept, 8000 dropped)"
        )
        assert set(data["signal_problems"]) == {"kv_usage_ratio"}  # the other signals read in full

        assert live_diagnose(stand_in.url, "--format", "text", "--max-series", "500") == EXIT_OK
        text = capsys.readouterr().out
        assert "capped: 500 of 10000 series" in text

        assert live_diagnose(stand_in.url, "--max-series", "0") == EXIT_OK
        assert "kv_usage_ratio" not in json.loads(capsys.readouterr().out)["signal_problems"]
