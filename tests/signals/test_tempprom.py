"""The temporary Prometheus: OpenMetrics text, the promtool round trip, failures and cleanup."""

from __future__ import annotations

import json
import math
import os
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from promserver import require_prometheus_binaries

from signals.errors import SignalError
from signals.tempprom import (
    MISSING_BINARIES,
    PrometheusNotInstalled,
    TemporaryPrometheus,
    TemporaryPrometheusError,
    find_binaries,
    to_openmetrics,
)

START = 1_760_000_000.0
NAN = math.nan
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def query(url: str, promql: str, at: float) -> list[dict[str, object]]:
    """A raw instant query, independent of signals.prometheus so the two are tested apart."""
    params = urllib.parse.urlencode({"query": promql, "time": at})
    with _NO_PROXY.open(f"{url}/api/v1/query?{params}", timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


# ----------------------------------------------------------------- the text, no binaries


def test_openmetrics_text_is_grouped_sorted_escaped_and_terminated() -> None:
    text = to_openmetrics(
        [
            ("vllm:num_requests_running", {"engine": "0", "model_name": "m"}, [1.0, NAN, 3.0], START, 15.0),
            ("vllm:num_requests_running", {"engine": "1", "model_name": "m"}, [4.0, 5.0, 6.0], START, 15.0),
            ("odd", {"path": 'a"b\\c\nd'}, [math.inf, -math.inf, 0.25], START + 0.5, 60.0),
        ]
    )
    assert text.splitlines() == [
        "# TYPE vllm:num_requests_running unknown",
        'vllm:num_requests_running{engine="0",model_name="m"} 1.0 1760000000',
        'vllm:num_requests_running{engine="1",model_name="m"} 4.0 1760000000',
        'vllm:num_requests_running{engine="1",model_name="m"} 5.0 1760000015',
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0 1760000030',
        'vllm:num_requests_running{engine="1",model_name="m"} 6.0 1760000030',
        "# TYPE odd unknown",
        'odd{path="a\\"b\\\\c\\nd"} +Inf 1760000000.500',
        'odd{path="a\\"b\\\\c\\nd"} -Inf 1760000060.500',
        'odd{path="a\\"b\\\\c\\nd"} 0.25 1760000120.500',
        "# EOF",
    ]


def test_openmetrics_of_nothing_is_just_eof() -> None:
    assert to_openmetrics([]) == "# EOF\n"


@pytest.mark.parametrize(
    ("name", "labels", "step", "message"),
    [
        ("1bad", {}, 15.0, "invalid metric name"),
        ("ok", {"bad-label": "x"}, 15.0, "invalid label name"),
        ("ok", {"__name__": "x"}, 15.0, "invalid label name"),
        ("ok", {}, 0.0, "step must be"),
        ("ok", {}, NAN, "step must be"),
    ],
)
def test_openmetrics_rejects_what_promtool_would_mangle(
    name: str, labels: dict[str, str], step: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        to_openmetrics([(name, labels, [1.0], START, step)])


def test_openmetrics_rejects_a_series_given_twice() -> None:
    with pytest.raises(ValueError, match="twice"):
        to_openmetrics([("m", {"a": "1"}, [1.0], START, 15.0), ("m", {"a": "1"}, [2.0], START + 60, 15.0)])


def test_missing_binaries_name_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PrometheusNotInstalled) as caught:
        find_binaries()
    assert str(caught.value) == MISSING_BINARIES
    assert isinstance(caught.value, SignalError)
    with pytest.raises(SignalError, match="install the Debian package `prometheus`"), TemporaryPrometheus():
        pass


# ----------------------------------------------------------------- real promtool + prometheus


@pytest.fixture
def binaries() -> None:
    require_prometheus_binaries()


@pytest.mark.usefixtures("binaries")
def test_round_trip_keeps_values_timestamps_gaps_and_labels() -> None:
    gauge = [1.0, 2.0, NAN, NAN, 5.0, 6.5, NAN, 8.0]
    text = to_openmetrics(
        [
            ("vllm:num_requests_running", {"model_name": "llama", "engine": "0"}, gauge, START, 15.0),
            ("vllm:request_success_total", {"model_name": "llama"}, [0.0, 10.0, 20.0], START, 60.0),
            ("vllm:e2e_request_latency_seconds_bucket", {"le": "+Inf"}, [1.0, 2.0], START, 60.0),
            ("odd", {"path": 'a"b\\c\nd é'}, [math.inf, 0.25], START, 60.0),
        ]
    )
    with TemporaryPrometheus(text) as prom:
        end = START + 7 * 15
        raw = query(prom.url, "vllm:num_requests_running[10m]", end)
        assert len(raw) == 1
        assert raw[0]["metric"] == {
            "__name__": "vllm:num_requests_running",
            "model_name": "llama",
            "engine": "0",
        }
        samples = [(float(t), float(v)) for t, v in raw[0]["values"]]  # type: ignore[attr-defined]
        expected = [(START + 15 * i, v) for i, v in enumerate(gauge) if not math.isnan(v)]
        assert samples == expected
        counter = query(prom.url, "vllm:request_success_total[10m]", START + 120)
        assert [float(v) for _, v in counter[0]["values"]] == [0.0, 10.0, 20.0]  # type: ignore[attr-defined]
        assert query(prom.url, "vllm:e2e_request_latency_seconds_bucket", START + 60)[0]["metric"] == {
            "__name__": "vllm:e2e_request_latency_seconds_bucket",
            "le": "+Inf",
        }
        odd = query(prom.url, "odd[5m]", START + 60)
        assert odd[0]["metric"] == {"__name__": "odd", "path": 'a"b\\c\nd é'}
        assert odd[0]["values"] == [[START, "+Inf"], [START + 60, "0.25"]]


@pytest.mark.usefixtures("binaries")
def test_empty_server_starts_and_answers() -> None:
    with TemporaryPrometheus() as prom:
        assert query(prom.url, "vector(1)", START)[0]["value"] == [START, "1"]


@pytest.mark.usefixtures("binaries")
def test_cleanup_stops_the_process_and_removes_the_directory() -> None:
    prom = TemporaryPrometheus(to_openmetrics([("g", {}, [1.0], START, 15.0)]))
    with pytest.raises(RuntimeError, match="boom"), prom:
        pid, directory = prom.pid, prom.directory
        assert pid is not None and directory.is_dir()
        raise RuntimeError("boom")
    assert not directory.exists()
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(RuntimeError, match="not running"):
        _ = prom.url


@pytest.mark.usefixtures("binaries")
def test_startup_failure_reports_the_log_and_cleans_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - record: x\n        expr: 'rate(oops[5m'\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    prom = TemporaryPrometheus(rule_files=[rules], startup_timeout=20)
    with pytest.raises(TemporaryPrometheusError) as caught:
        prom.start()
    message = str(caught.value)
    assert message.startswith("prometheus exited at start")
    assert "rules.yml" in message
    assert list(scratch.iterdir()) == []
    assert prom.pid is None


@pytest.mark.usefixtures("binaries")
def test_promtool_failure_reports_its_output_and_cleans_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(TemporaryPrometheusError, match="create-blocks-from openmetrics failed"):
        TemporaryPrometheus("this is not openmetrics {\n# EOF\n").start()
    assert list(tmp_path.iterdir()) == []
