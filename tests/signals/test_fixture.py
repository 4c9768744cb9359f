"""The fixture reader: what it builds, and a clear located error for every kind of bad input."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from signals.errors import InputError
from signals.fixture import load_fixture

GOOD = """\
name: tiny
description: two replicas and a fleet series
interval: 15s
start: 2026-10-14T14:00:00Z
at: 1m
symptom: tpot_slow
alert: {labels: {alertname: TPOTHigh, severity: page}, annotations: {}}
input_series:
  - series: 'kv_usage_ratio{instance="vllm-0"}'
    values: '0.5+0.1x4 0.99x2'
  - series: 'kv_usage_ratio{instance="vllm-1"}'
    values: '0.5 _ 0.5 stale'
  - series: request_rate
    values: '10x7'
expect:
  cause: kv_pressure
  forbidden: [scale_out]
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_reads_series_labels_and_metadata(tmp_path: Path) -> None:
    f = load_fixture(write(tmp_path, GOOD))
    assert f.name == "tiny" and f.interval == 15 and f.symptom == "tpot_slow"
    assert f.at == f.start + 60
    assert f.alert_labels == {"alertname": "TPOTHigh", "severity": "page"}
    assert f.expect is not None and f.expect.cause == "kv_pressure" and f.expect.forbidden == ("scale_out",)
    frame = f.frame
    assert len(frame.times) == 8 and frame.step == 15
    view = frame.replicas("kv_usage_ratio")
    assert view.replicas == ("vllm-0", "vllm-1")
    assert view.values[0].tolist() == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 0.99, 0.99])
    assert math.isnan(view.values[1][1]) and math.isnan(view.values[1][3]) and math.isnan(view.values[1][6])
    assert frame.fleet("request_rate").tolist() == [10.0] * 8  # a series without instance is the fleet view


def test_expect_none_means_no_cause(tmp_path: Path) -> None:
    f = load_fixture(write(tmp_path, GOOD.replace("cause: kv_pressure", "cause: none")))
    assert f.expect is not None and f.expect.no_cause and f.expect.cause is None


def test_default_at_is_the_last_sample(tmp_path: Path) -> None:
    f = load_fixture(write(tmp_path, GOOD.replace("at: 1m\n", "")))
    assert f.at == f.frame.end


def test_at_as_rfc3339(tmp_path: Path) -> None:
    f = load_fixture(write(tmp_path, GOOD.replace("at: 1m", "at: 2026-10-14T14:01:15Z")))
    assert f.at == f.start + 75


@pytest.mark.parametrize(
    ("change", "line", "key", "fragment"),
    [
        (("interval: 15s", "intervall: 15s"), 3, "intervall", "unknown key (did you mean interval?)"),
        (
            ("series: request_rate", "series: request_rat"),
            13,
            "input_series[2].series",
            "unknown signal 'request_rat' (did you mean request_rate?)",
        ),
        (("values: '10x7'", "values: ''"), 14, "input_series[2].values", "no values"),
        (("values: '10x7'", "values: '10 NaN'"), 14, "input_series[2].values", "NaN and Inf"),
        (("values: '10x7'", "values: '10 Inf'"), 14, "input_series[2].values", "NaN and Inf"),
        (("values: '10x7'", "values: '10 1.2.3'"), 14, "input_series[2].values", "item 2 '1.2.3'"),
        (("at: 1m", "at: 3h"), 5, "at", "outside the data"),
        (("at: 1m", "at: tomorrow"), 5, "at", "RFC 3339"),
        (("interval: 15s", "interval: fast"), 3, "interval", "not a duration"),
        (("start: 2026-10-14T14:00:00Z", "start: soon"), 4, "start", "RFC 3339"),
        (
            ("  cause: kv_pressure", "  cause: kv_pressure\n  because: reasons"),
            17,
            "expect.because",
            "unknown key",
        ),
        (
            (
                "series: 'kv_usage_ratio{instance=\"vllm-1\"}'",
                "series: 'kv_usage_ratio{instance=\"vllm-0\"}'",
            ),
            11,
            "input_series[1].series",
            "also given at input_series[0]",
        ),
        (
            (
                "series: 'kv_usage_ratio{instance=\"vllm-1\"}'",
                "series: 'kv_usage_ratio{instance=~\"vllm-1\"}'",
            ),
            11,
            "input_series[1].series",
            "only = matchers",
        ),
        (("name: tiny", "name: ''"), 1, "name", "unique name"),
        (
            ("alert: {labels: {alertname: TPOTHigh, severity: page}, annotations: {}}", "alert: [1]"),
            7,
            "alert",
            "expected a mapping",
        ),
    ],
)
def test_bad_input_is_located(
    tmp_path: Path, change: tuple[str, str], line: int, key: str, fragment: str
) -> None:
    text = GOOD.replace(*change)
    assert text != GOOD
    with pytest.raises(InputError) as err:
        load_fixture(write(tmp_path, text))
    assert err.value.line == line, str(err.value)
    assert err.value.key == key, str(err.value)
    assert fragment in err.value.message, str(err.value)
    assert str(err.value).startswith(f"{tmp_path / 'f.yaml'}:{line}: {key}: ")


def test_no_input_series(tmp_path: Path) -> None:
    text = GOOD[: GOOD.index("input_series:")]
    with pytest.raises(InputError, match="input_series: missing"):
        load_fixture(write(tmp_path, text))


def test_empty_input_series(tmp_path: Path) -> None:
    text = GOOD[: GOOD.index("input_series:")] + "input_series: []\n"
    with pytest.raises(InputError, match="non-empty list"):
        load_fixture(write(tmp_path, text))


def test_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="a fixture is a mapping"):
        load_fixture(write(tmp_path, "- just\n- a list\n"))


def test_raw_level_keeps_exporter_names(tmp_path: Path) -> None:
    text = GOOD.replace("series: request_rate", "series: 'vllm:num_requests_running{model_name=\"m\"}'")
    f = load_fixture(write(tmp_path, "level: raw\n" + text))
    assert f.level == "raw"
    assert "vllm:num_requests_running" in f.frame.signals()
    with pytest.raises(InputError, match="unknown signal"):
        load_fixture(write(tmp_path, text))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_fixture(str(tmp_path / "nope.yaml"))
    with pytest.raises(InputError, match="is a directory"):
        load_fixture(str(tmp_path))


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match="not UTF-8"):
        load_fixture(str(path))


def test_shorter_series_are_padded_with_gaps(tmp_path: Path) -> None:
    f = load_fixture(write(tmp_path, GOOD.replace("values: '10x7'", "values: '10x2'")))
    fleet = f.frame.fleet("request_rate")
    assert fleet[:3].tolist() == [10.0] * 3 and np.isnan(fleet[3:]).all()
