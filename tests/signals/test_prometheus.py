"""The Prometheus seam: every fault answered within the deadline as one clear line, and real PromQL.

Faults are played by the local stand-in (`tests/promserver.py`); the happy path runs
against a real, backfilled `TemporaryPrometheus` with vLLM-shaped series.
"""

from __future__ import annotations

import base64
import logging
import math
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import urllib3.exceptions
from promserver import PromStandIn, Reply
from vmserver import ENGINES, TemporaryVictoriaMetrics, require_engine, temporary_engine

from signals.errors import SignalError
from signals.prometheus import (
    PrometheusBadReply,
    PrometheusError,
    PrometheusRejected,
    PrometheusSource,
    PrometheusUnavailable,
    QueryResult,
    ReadProgress,
)
from signals.tempprom import TemporaryPrometheus, free_loopback_port, to_openmetrics

START = 1_760_000_000.0
STEP = 15.0
SLACK = 0.5
MATRIX = [{"metric": {"__name__": "up", "instance": "a"}, "values": [[START, "1"], [START + 15, "0"]]}]


def one(source: PrometheusSource, query: str = "up") -> QueryResult:
    return source.range_queries({"q": query}, START, START + 60, STEP)["q"]


@pytest.fixture
def make_source() -> Iterator[Any]:
    made: list[PrometheusSource] = []

    def make(url: str, **options: Any) -> PrometheusSource:
        options.setdefault("timeout", 2.0)
        source = PrometheusSource(url, **options)
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()


# ------------------------------------------------------------------ transient faults


def test_503_is_retried_a_bounded_number_of_times(make_source: Any) -> None:
    with PromStandIn(Reply.unavailable()) as stand:
        source = make_source(stand.url, max_retries=2)
        began = time.monotonic()
        result = one(source)
        elapsed = time.monotonic() - began
    assert (
        result.error == f"HTTP 503 from {stand.url}/api/v1/query_range: unavailable: overloaded (3 attempts)"
    )
    assert result.error_kind == "unavailable"
    assert result.http_requests == 3 == stand.requests == source.http_requests
    assert elapsed < 2.0 + SLACK
    assert result.series == [] and not result.ok


def test_503_then_success_recovers_on_retry(make_source: Any) -> None:
    with PromStandIn(Reply.unavailable(), Reply.success(MATRIX)) as stand:
        result = one(make_source(stand.url))
    assert result.ok, result.error
    assert result.http_requests == 2
    labels, times, values = result.series[0]
    assert labels == {"__name__": "up", "instance": "a"}
    assert times.tolist() == [START, START + 15] and values.tolist() == [1.0, 0.0]


def test_long_retry_after_is_not_waited_for(make_source: Any) -> None:
    with PromStandIn(Reply.unavailable(retry_after="20")) as stand:
        began = time.monotonic()
        result = one(make_source(stand.url))
        elapsed = time.monotonic() - began
    assert elapsed < SLACK
    assert stand.requests == 1
    assert result.error is not None
    assert result.error.endswith("(Retry-After 20s is beyond the 2.0s deadline)")


def test_short_retry_after_is_honoured(make_source: Any) -> None:
    with PromStandIn(Reply.unavailable(retry_after="1"), Reply.success(MATRIX)) as stand:
        began = time.monotonic()
        result = one(make_source(stand.url, timeout=3.0))
        elapsed = time.monotonic() - began
    assert result.ok and result.http_requests == 2
    assert 1.0 <= elapsed < 3.0 + SLACK


def worker_threads_end_within(seconds: float) -> bool:
    """Whether the round's worker threads are gone in time (their own socket timeouts ended them)."""
    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        if not any(t.name.startswith("prometheus") for t in threading.enumerate()):
            return True
        time.sleep(0.02)
    return False


def test_stalled_server_times_out_at_the_deadline(make_source: Any) -> None:
    with PromStandIn(Reply.stalled(30)) as stand:
        began = time.monotonic()
        result = one(make_source(stand.url, timeout=1.0))
        elapsed = time.monotonic() - began
        assert worker_threads_end_within(SLACK), "a worker is still blocked on the stalled server"
    assert result.error == "timeout after 1.0s"
    assert result.error_kind == "timeout"
    assert result.http_requests == 1
    assert elapsed < 1.0 + SLACK


def test_a_whole_round_shares_one_deadline(make_source: Any) -> None:
    queries = {f"q{i}": f"up{{i='{i}'}}" for i in range(30)}
    with PromStandIn(Reply.stalled(30)) as stand:
        source = make_source(stand.url, timeout=1.0, max_workers=8)
        began = time.monotonic()
        results = source.range_queries(queries, START, START + 60, STEP)
        elapsed = time.monotonic() - began
        assert worker_threads_end_within(SLACK), "a worker is still blocked on the stalled server"
    assert elapsed < 1.0 + SLACK
    assert set(results) == set(queries)
    assert {r.error for r in results.values()} == {"timeout after 1.0s"}
    assert stand.requests <= 8
    assert [r.query for r in results.values()] == list(queries.values())


def test_hang_up_is_unreachable_and_retried(make_source: Any) -> None:
    with PromStandIn(Reply.closed()) as stand:
        began = time.monotonic()
        result = one(make_source(stand.url))
        elapsed = time.monotonic() - began
    assert result.error == f"unreachable: connection closed by the server ({stand.url}) (3 attempts)"
    assert result.error_kind == "unreachable"
    assert stand.requests == 3
    assert elapsed < 2.0 + SLACK


def test_connection_refused_is_unreachable_within_the_deadline(make_source: Any) -> None:
    url = f"http://127.0.0.1:{free_loopback_port()}"
    source = make_source(url, timeout=1.0)
    began = time.monotonic()
    result = one(source)
    elapsed = time.monotonic() - began
    assert result.error == f"unreachable: connection refused ({url}) (3 attempts)"
    assert result.http_requests == 3
    assert elapsed < 1.0 + SLACK
    with pytest.raises(PrometheusUnavailable, match="connection refused") as caught:
        source.metric_names()
    assert caught.value.kind == "unreachable"


# ------------------------------------------------------------------ final errors


def test_bad_data_is_one_line_not_retried_and_does_not_hide_other_queries(make_source: Any) -> None:
    parse_error = 'parse error at char 5: unexpected "{" in aggregation'
    with PromStandIn(
        Reply.success(MATRIX), by_query={"sum{": [Reply.error("bad_data", parse_error, 400)]}
    ) as stand:
        results = make_source(stand.url).range_queries({"bad": "sum{", "good": "up"}, START, START + 60, STEP)
    assert results["bad"].error == f"bad_data: {parse_error}"
    assert results["bad"].error_kind == "bad_data"
    assert results["bad"].http_requests == 1
    assert results["good"].ok and len(results["good"].series) == 1
    assert stand.requests == 2


def test_execution_error_422_is_not_retried(make_source: Any) -> None:
    message = "query processing would load too many samples into memory in query execution"
    with PromStandIn(Reply.error("execution", message, 422)) as stand:
        result = one(make_source(stand.url))
    assert result.error == f"execution: {message}"
    assert stand.requests == 1


def test_server_side_query_timeout_is_not_retried(make_source: Any) -> None:
    with PromStandIn(Reply.error("timeout", "query timed out in expression evaluation", 503)) as stand:
        result = one(make_source(stand.url))
    assert result.error == (
        f"HTTP 503 from {stand.url}/api/v1/query_range: timeout: query timed out in expression evaluation"
    )
    assert stand.requests == 1


def test_html_200_is_named_not_json(make_source: Any) -> None:
    with PromStandIn(Reply.html()) as stand:
        result = one(make_source(stand.url))
    assert result.error == f"not JSON (text/html) from {stand.url}/api/v1/query_range"
    assert result.error_kind == "not_json"
    assert stand.requests == 1


def test_proxy_401_is_an_auth_error(make_source: Any) -> None:
    with PromStandIn(Reply.html(status=401)) as stand:
        source = make_source(stand.url)
        result = one(source)
        with pytest.raises(PrometheusRejected) as caught:
            source.metric_names()
    assert result.error == (
        f"HTTP 401 from {stand.url}/api/v1/query_range: not authorised (check the token or credentials)"
    )
    assert caught.value.kind == "auth"
    assert stand.requests == 2


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(body=b'{"data": []}'), "unexpected reply (no Prometheus status) from "),
        (Reply.success([{"metric": {}, "values": [[START, "lots"]]}]), "malformed reply: bad samples"),
        (Reply.success([{"metric": {}, "values": [[START]]}]), "malformed reply: bad samples"),
        (Reply.success("x", result_type="string"), "malformed reply: unsupported result type 'string'"),
        (
            Reply.success([{"metric": {}, "histograms": [[START, {"count": "1"}]]}]),
            "malformed reply: native histogram samples: not supported",
        ),
    ],
)
def test_malformed_success_replies_are_bad_replies(make_source: Any, reply: Reply, expected: str) -> None:
    with PromStandIn(reply) as stand:
        result = one(make_source(stand.url))
    assert result.error is not None and result.error.startswith(expected), result.error
    assert stand.requests == 1


# ------------------------------------------------------------------ what is kept


def test_warnings_infos_and_special_values_are_kept(make_source: Any) -> None:
    series = [
        {"metric": {"le": "+Inf"}, "values": [[START, "NaN"], [START + 15, "+Inf"], [START + 30, "-Inf"]]}
    ]
    warning = 'PromQL warning: bucket label "le" is missing or has a malformed value'
    with PromStandIn(Reply.success(series, warnings=[warning], infos=["PromQL info: x"])) as stand:
        result = one(make_source(stand.url))
    assert result.ok and result.partial
    assert result.warnings == [warning] and result.infos == ["PromQL info: x"]
    values = result.series[0][2]
    assert math.isnan(values[0]) and values[1] == math.inf and values[2] == -math.inf
    assert result.series[0][2].dtype == np.float64


def test_instant_results_vector_scalar_and_empty(make_source: Any) -> None:
    vector = [{"metric": {"instance": "a"}, "value": [START, "2.5"]}]
    with PromStandIn(
        by_query={
            "v": [Reply.success(vector, "vector")],
            "s": [Reply.success([START, "7"], "scalar")],
            "e": [Reply.success([], "vector")],
        }
    ) as stand:
        source = make_source(stand.url)
        v, s, e = (source.instant_query(q, at=START) for q in "vse")
    assert [(labels, t.tolist(), x.tolist()) for labels, t, x in v.series] == [
        ({"instance": "a"}, [START], [2.5])
    ]
    assert [(labels, x.tolist()) for labels, _, x in s.series] == [({}, [7.0])]
    assert e.ok and e.series == []
    assert stand.seen[0].path == "/api/v1/query" and stand.seen[0].params["time"] == ["1760000000"]


def test_range_parameters_are_exact_and_carry_a_server_timeout(make_source: Any) -> None:
    with PromStandIn(Reply.success(MATRIX)) as stand:
        make_source(stand.url).range_queries({"q": "up"}, START + 0.5, START + 3600.25, 7.5)
    params = stand.seen[0].params
    assert (params["start"], params["end"], params["step"]) == (["1760000000.5"], ["1760003600.25"], ["7.5"])
    assert 0 < float(params["timeout"][0]) <= 2.0


def test_replies_are_asked_uncompressed_unless_compress(make_source: Any) -> None:
    # gzip costs Prometheus about as much CPU as the JSON it compresses: a diagnosis does not ask
    # for it unless told to (a slow link); a user header still wins.
    for kwargs, wanted in (
        ({}, "identity"),
        ({"compress": True}, "gzip"),
        ({"headers": {"Accept-Encoding": "br"}}, "br"),
    ):
        with PromStandIn(Reply.names(["up"])) as stand:
            make_source(stand.url, **kwargs).metric_names()
        assert stand.seen[0].headers["Accept-Encoding"] == wanted, kwargs


# ------------------------------------------------------------------ auth and secrets


def test_bearer_token_is_sent_and_never_logged(make_source: Any, caplog: pytest.LogCaptureFixture) -> None:
    token = "s3cr3t-t0ken-value"
    caplog.set_level(logging.DEBUG)
    with PromStandIn(Reply.unavailable(), Reply.html()) as stand:
        source = make_source(stand.url, bearer_token=token, headers={"X-Scope-OrgID": "tenant-1"})
        result = one(source)
    assert all(seen.headers["Authorization"] == f"Bearer {token}" for seen in stand.seen)
    assert stand.seen[0].headers["X-Scope-OrgID"] == "tenant-1"
    assert "retrying" in caplog.text
    assert token not in caplog.text and token not in str(result) and token not in repr(source)


def test_basic_auth_is_sent_and_never_logged(make_source: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with PromStandIn(Reply.unavailable(), Reply.success(MATRIX)) as stand:
        result = one(make_source(stand.url, basic_auth=("alice", "pa55-w0rd")))
    expected = "Basic " + base64.b64encode(b"alice:pa55-w0rd").decode()
    assert [seen.headers["Authorization"] for seen in stand.seen] == [expected, expected]
    assert result.ok
    assert "pa55-w0rd" not in caplog.text and base64.b64encode(b"alice:pa55-w0rd").decode() not in caplog.text


def test_credentials_in_the_url_never_reach_messages(make_source: Any) -> None:
    with PromStandIn(Reply.html()) as stand:
        url = stand.url.replace("http://", "http://bob:hunter2@")
        source = make_source(url)
        result = one(source)
        with pytest.raises(PrometheusBadReply) as caught:
            source.check()
    assert result.error == f"not JSON (text/html) from {stand.url}/api/v1/query_range"
    assert "hunter2" not in str(caught.value) and "hunter2" not in repr(source)


def test_verify_false_is_logged_loudly(make_source: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="signals.prometheus"):
        make_source("https://prometheus.example:9090", verify=False)
    assert "TLS certificate verification is DISABLED for https://prometheus.example:9090" in caplog.text


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A throwaway self-signed certificate for 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not on PATH: cannot make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_tls_failure_is_final_and_a_ca_bundle_fixes_it(
    make_source: Any,
    certificate: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Also with REQUESTS_CA_BUNDLE set, which requests lets override a Session's own bundle."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    with PromStandIn(Reply.success(MATRIX), tls=certificate) as stand:
        assert stand.url.startswith("https://")
        strict = make_source(stand.url)
        began = time.monotonic()
        result = one(strict)
        assert time.monotonic() - began < 2.0 + SLACK
        assert result.error == (
            f"TLS error talking to {stand.url}: certificate verify failed: self-signed certificate"
        )
        assert result.error_kind == "tls" and result.http_requests == 1
        assert one(make_source(stand.url, ca_bundle=certificate[0])).ok
        with (
            caplog.at_level(logging.WARNING, logger="signals.prometheus"),
            pytest.warns(urllib3.exceptions.InsecureRequestWarning),
        ):
            assert one(make_source(stand.url, verify=False)).ok
    assert "DISABLED" in caplog.text


# ------------------------------------------------------------------ the other calls


def test_metric_names_and_check_map_failures_to_signal_errors(make_source: Any) -> None:
    with PromStandIn(Reply.unavailable()) as stand:
        with pytest.raises(PrometheusUnavailable) as unavailable:
            make_source(stand.url, max_retries=0).metric_names()
        stand.play(Reply.html())
        with pytest.raises(PrometheusBadReply):
            make_source(stand.url).metric_names()
        assert not make_source(stand.url).ping()
        stand.play(Reply.names(["up", "vllm:num_requests_running"]))
        assert make_source(stand.url).metric_names() == {"up", "vllm:num_requests_running"}
        stand.play(Reply.success([{"metric": {}, "value": [START, "1"]}], "vector"))
        source = make_source(stand.url)
        source.check()
        assert source.ping()
    assert isinstance(unavailable.value, SignalError) and isinstance(unavailable.value, PrometheusError)
    assert unavailable.value.kind == "unavailable"
    assert stand.seen[0].path == "/api/v1/label/__name__/values"


def test_progress_counts_every_request_across_rounds_failures_included(make_source: Any) -> None:
    heard: list[ReadProgress] = []
    lock = threading.Lock()

    def listen(progress: ReadProgress) -> None:
        with lock:
            heard.append(progress)

    with PromStandIn(
        Reply.success(MATRIX), by_query={"sum{": [Reply.error("bad_data", "parse error", 400)]}
    ) as stand:
        source = make_source(stand.url, progress=listen)
        first = source.range_queries({"a": "up", "b": "up == 1", "bad": "sum{"}, START, START + 60, STEP)
        assert heard[-1] == ReadProgress(3, 3)
        source.range_queries({"c": "up", "d": "up > 0"}, START, START + 60, STEP)
    assert first["bad"].error and first["a"].ok
    assert heard[-1] == ReadProgress(5, 5)
    assert len(heard) == 2 + 5  # once as each round is sent, once as each request ends
    assert sorted({p.answered for p in heard}) == [0, 1, 2, 3, 4, 5]
    assert all(p.answered <= p.asked for p in heard)
    assert heard == sorted(heard, key=lambda p: (p.asked, p.answered))  # heard in order, never back


def test_each_load_a_front_end_watches_hears_its_own_rounds_from_zero(make_source: Any) -> None:
    lifelong: list[ReadProgress] = []
    first: list[ReadProgress] = []
    second: list[ReadProgress] = []
    with PromStandIn(Reply.success(MATRIX)) as stand:
        source = make_source(stand.url, progress=lifelong.append)
        one(source)  # before any load is watched
        with source.reading(first.append):
            source.range_queries({"a": "up", "b": "up > 0"}, START, START + 60, STEP)
            with source.reading(second.append):  # a load overlapping the first
                one(source)
        one(source)  # after both: only the lifelong listener hears it
    assert first[-1] == ReadProgress(3, 3) and len(first) == 2 + 3
    assert second[-1] == ReadProgress(1, 1) and len(second) == 1 + 1
    assert lifelong[-1] == ReadProgress(5, 5)


def test_a_failing_progress_listener_never_fails_the_read(make_source: Any) -> None:
    def broken(_: ReadProgress) -> None:
        raise RuntimeError("display gone")

    with PromStandIn(Reply.success(MATRIX)) as stand:
        result = one(make_source(stand.url, progress=broken))
    assert result.ok and len(result.series) == 1


def test_argument_errors_are_value_errors() -> None:
    with pytest.raises(ValueError, match="not an http"):
        PrometheusSource("localhost:9090")
    with pytest.raises(ValueError, match="not both"):
        PrometheusSource("http://x", bearer_token="t", basic_auth=("u", "p"))
    with pytest.raises(ValueError, match="timeout"):
        PrometheusSource("http://x", timeout=0)
    with pytest.raises(ValueError, match="control characters") as caught:
        PrometheusSource("http://x", bearer_token="s3cret\r\nX-Evil: 1")
    assert "s3cret" not in str(caught.value)
    with PrometheusSource("http://x") as source:
        with pytest.raises(ValueError, match="step"):
            source.range_queries({"q": "up"}, START, START + 60, 0)
        with pytest.raises(ValueError, match="bad range"):
            source.range_queries({"q": "up"}, START + 60, START, 15)
        assert source.range_queries({}, START, START + 60, 15) == {}


# ------------------------------------------------------------------ a real Prometheus

STEPS = 240
RESET_AT = 120
TRAFFIC_UNTIL = 119
MODEL = "llama-3-8b"
BUCKETS = {"0.1": 0.0, "0.5": 10.0, "1": 20.0, "+Inf": 20.0}
"""Cumulative observations per step while there is traffic: half in (0.1, 0.5], half in (0.5, 1]."""


def vllm_series() -> str:
    """An hour of vLLM-shaped series: a counter that resets, a TTFT histogram whose traffic stops, gauges."""
    counter = [150.0 * i if i < RESET_AT else 5.0 + 150.0 * (i - RESET_AT) for i in range(STEPS)]
    series: list[tuple[str, dict[str, str], list[float], float, float]] = [
        ("vllm:request_success_total", {"model_name": MODEL, "engine": "0"}, counter, START, STEP),
        (
            "vllm:num_requests_running",
            {"model_name": MODEL, "engine": "0"},
            [float(i % 7) for i in range(STEPS)],
            START,
            STEP,
        ),
        ("vllm:num_requests_running", {"model_name": MODEL, "engine": "1"}, [3.0] * STEPS, START, STEP),
    ]
    for le, per_step in BUCKETS.items():
        values = [per_step * min(i, TRAFFIC_UNTIL) for i in range(STEPS)]
        labels = {"model_name": MODEL, "le": le}
        series.append(("vllm:time_to_first_token_seconds_bucket", labels, values, START, STEP))
    return to_openmetrics(series)


@pytest.fixture(scope="module", params=ENGINES)
def prometheus(request: pytest.FixtureRequest) -> Iterator[TemporaryPrometheus | TemporaryVictoriaMetrics]:
    """A real engine (Prometheus, then VictoriaMetrics) serving `vllm_series()`."""
    require_engine(request.param)
    with temporary_engine(request.param, vllm_series()) as server:
        yield server


def test_real_metric_names_and_check(
    prometheus: TemporaryPrometheus | TemporaryVictoriaMetrics, make_source: Any
) -> None:
    source = make_source(prometheus.url)
    source.check()
    assert {
        "vllm:request_success_total",
        "vllm:num_requests_running",
        "vllm:time_to_first_token_seconds_bucket",
    } <= source.metric_names()


def test_real_gauges_come_back_at_their_timestamps(
    prometheus: TemporaryPrometheus | TemporaryVictoriaMetrics, make_source: Any
) -> None:
    query = f'vllm:num_requests_running{{model_name="{MODEL}"}}'
    result = make_source(prometheus.url).range_queries({"running": query}, START, START + 600, STEP)[
        "running"
    ]
    assert result.ok and not result.warnings and result.http_requests == 1
    by_engine = {labels["engine"]: (times, values) for labels, times, values in result.series}
    times, values = by_engine["0"]
    assert times.tolist() == [START + STEP * i for i in range(41)]
    assert values.tolist() == [float(i % 7) for i in range(41)]
    assert set(by_engine["1"][1].tolist()) == {3.0}


def test_real_rate_survives_a_counter_reset(
    prometheus: TemporaryPrometheus | TemporaryVictoriaMetrics, make_source: Any
) -> None:
    source = make_source(prometheus.url)
    end = START + STEP * (STEPS - 1)
    results = source.range_queries(
        {
            "rate": "rate(vllm:request_success_total[5m])",
            "raw": "vllm:request_success_total",
        },
        START + 300,
        end,
        STEP,
    )
    rate = results["rate"].series[0][2]
    raw = results["raw"].series[0][2]
    assert (np.diff(raw) < 0).sum() == 1, "the fixture must contain exactly one counter reset"
    assert rate.min() >= 0
    assert np.median(rate) == pytest.approx(10.0, rel=0.01)
    assert source.instant_query("resets(vllm:request_success_total[1h])", at=end).series[0][2].tolist() == [
        1.0
    ]


def test_real_histogram_quantile_and_nan_on_zero_traffic(
    prometheus: TemporaryPrometheus | TemporaryVictoriaMetrics, make_source: Any
) -> None:
    query = "histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))"
    result = make_source(prometheus.url).range_queries({"p90": query}, START + 300, START + 3585, STEP)["p90"]
    assert result.ok and len(result.series) == 1
    _, times, p90 = result.series[0]
    busy = times <= START + STEP * TRAFFIC_UNTIL
    idle = times >= START + STEP * TRAFFIC_UNTIL + 300
    assert busy.any()
    assert np.allclose(p90[busy], 0.9)
    # No traffic, no quantile: Prometheus answers NaN points, VictoriaMetrics leaves them out.
    assert np.isnan(p90[idle]).all()
    assert idle.any() or times.max() < START + STEP * TRAFFIC_UNTIL + 300


def test_retry_then_real_answer_through_the_stand_in(
    prometheus: TemporaryPrometheus | TemporaryVictoriaMetrics, make_source: Any
) -> None:
    query = 'vllm:num_requests_running{engine="1"}'
    direct = make_source(prometheus.url).range_queries({"q": query}, START, START + 300, STEP)["q"]
    with PromStandIn(Reply.unavailable(), Reply.proxied(prometheus.url)) as stand:
        retried = make_source(stand.url).range_queries({"q": query}, START, START + 300, STEP)["q"]
    assert retried.ok and retried.http_requests == 2
    assert [(lab, t.tolist(), v.tolist()) for lab, t, v in retried.series] == [
        (lab, t.tolist(), v.tolist()) for lab, t, v in direct.series
    ]
